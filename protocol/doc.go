// Package protocol is the pure core of IACP (draft-vystartas-iacp-00, with the framing, limits
// and lifecycle of IaCP 1.0): the message envelope and its JSON and YAML codecs, RFC 8785
// canonicalisation and Ed25519 signatures, validation with typed errors mapped to IACP error
// codes, the replay window, stream framing and message builders.
//
// The package does no network I/O, starts no goroutine and never reads the clock: every
// function that depends on time takes it from its caller. It imports nothing else of this
// module, so every rule of the specification can be tested, and fuzzed, as a pure function.
//
// The choices the drafts leave open are documented in docs/protocol.md; the decisions between
// conflicting drafts are in ../shared/specs/README.md.
package protocol
