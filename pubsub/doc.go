// Package pubsub is the node's many-to-many layer: IACP events, group messages and heartbeats
// carried by gossipsub (go-libp2p-pubsub), and the liveness table built from the heartbeats.
//
// Topics live under a versioned prefix (DefaultTopicPrefix, "/iacp/1/"):
//
//	<prefix>broadcast           events to every agent (recipient "*", channel notification)
//	<prefix>heartbeat           heartbeats (channel health)
//	<prefix>group/<capability>  messages to every agent that has <capability>
//
// Every payload on the wire is one signed IACP JSON document (protocol.EncodeJSON). A topic
// validator checks each message before gossipsub relays or delivers it; invalid messages are
// rejected, so that gossipsub's peer scoring punishes whoever delivered them. See
// docs/gossip.md for the flow of one message and the reasons behind every parameter.
//
// Gossip composes the pieces; Liveness is the heartbeat state machine on its own, with no
// goroutine and no clock, so that it can be tested deterministically. It includes the node's
// local health (Health, Lifeguard's Local Health Multiplier), which stretches the suspect
// timeouts of a node whose own timers run late.
package pubsub
