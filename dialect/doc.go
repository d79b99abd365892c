// Package dialect translates between IACP (draft-vystartas-iacp-00, package protocol) and the
// other drafts' message shapes, so that an agent written against one of them can use the mesh
// unchanged: IaCP 1.0 (specs/000), the ElizaOS performatives (specs/004), ACP v2's
// AgentCommand and AgentResponse (specs/002) and A2ACP v1.0 (specs/003), which is validated
// against the draft's own JSON Schema.
//
// The package is pure: it does no I/O, starts no goroutine and reads no clock (ToIACP takes the
// time to measure an expiry against from its caller).
//
// A translation goes in two steps. Decode parses a document and checks it against its own
// draft; ToIACP maps it to a Draft, what a protocol.Builder needs to build the IACP message
// (type, intent, recipient, payload, TTL, correlation). FromIACP goes the other way, from a
// protocol.Message to a document in any dialect.
//
// Nothing is lost on the way. Every member of the original document that the IACP message does
// not reproduce exactly travels in the message body under the extension member "x-dialect"
// (ExtensionMember; its shape is Extension and docs/dialects.md). FromIACP into the document's
// own dialect restores the original, canonically equal (RFC 8785) to what was sent.
package dialect
