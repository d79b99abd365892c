// Package node is an IACP node: a libp2p host that owns one agent's identity and speaks IACP
// to other nodes over the /iacp/1.0.0 stream protocol.
//
// A Node is built with New from options over DefaultConfig. It checks every inbound message
// before any handler sees it (rate, version, signature, sender peer, validation, trust,
// recipient, policy, replay), answers capability queries and health requests by itself, and
// hands handoff, negotiate and notify messages to the handlers the agent registers with Handle.
// Go agents use Send, Request and Handle; agents in other languages use the local API, which is
// built on the same calls.
//
// The exchange on the wire is described step by step in docs/node.md.
package node
