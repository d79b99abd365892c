// Package protocol is the pure core of IACP (draft-vystartas-iacp-00, with the framing, limits
// and lifecycle of IaCP 1.0): the message envelope and its JSON and YAML codecs, RFC 8785
// canonicalisation and Ed25519 signatures, validation with typed errors mapped to IACP error
// codes, the replay window, stream framing and message builders.
//
// The package does no network I/O and starts no goroutine. Only Builder reads the clock and
// the system's randomness: Seal gives a message without an id a UUIDv7 from
// github.com/google/uuid's NewV7, which reads the wall clock and crypto/rand, and a Builder
// made with a nil clock stamps timestamps from time.Now. Every other function that depends on
// time takes it from its caller, and nothing else draws random numbers. The package imports
// nothing else of this module, so every rule of the specification can be tested, and fuzzed,
// as a pure function.
//
// The drafts, the decisions between them where they conflict, and the choices they leave open
// are documented in docs/protocol.md.
package protocol
