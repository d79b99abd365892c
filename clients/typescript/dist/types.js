// The documents of the IACP protocol and of the node's local API, as JSON on the wire.
// Field names are the wire's (snake_case); docs/api.md and docs/protocol.md describe them.
export {};
