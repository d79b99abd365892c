// Package a2abridge bridges the IACP mesh and the A2A protocol (Agent2Agent, a2a-protocol.org),
// A2A 1.0 and 0.3, with the A2A Go SDK (github.com/a2aproject/a2a-go/v2, and its a2av0
// compatibility package for 0.3), both ways (docs/a2a.md):
//
//   - Inbound, Server: A2A clients reach mesh agents. It is a client of a node's local API
//     (apiclient), as mcpserver is, and serves, for the node's own agent and for any mesh
//     agent by id, an A2A agent card made from the agent's IACP manifest (1.0 and 0.3 members
//     in one document, signed with a key its JWKS holds) and its endpoints: JSON-RPC (1.0
//     and 0.3 methods) and 1.0 HTTP+JSON. A message becomes an IACP request to that agent;
//     its response becomes the A2A task's artifact, its error a failed task that names the
//     code.
//   - Outbound, Attach: a mesh agent reaches an external A2A agent. Attach runs a node whose
//     agent is the A2A agent of a card (1.0 or 0.3): its manifest holds the card's skills, it
//     is published in discovery like any agent, and each IACP request to it becomes an A2A
//     message to the card's newest interface, whose task result comes back as the IACP
//     response.
//
// A2A messages and IACP payloads are mapped the same way both ways (PayloadOf, PartsOf): text
// parts are the payload's "text", data parts are merged into it, file parts listed under
// "files", and the A2A ids kept under "a2a".
package a2abridge

import "time"

// Defaults and bounds.
const (
	// DefaultWait is how long one bridged call waits for its answer when no wait is set: an
	// A2A message/send for the mesh agent's response (inbound), an IACP request for the A2A
	// agent's task result (outbound, or the request's own TTL when sooner).
	DefaultWait = 30 * time.Second
	// MaxWait bounds a configured wait: the local API waits at most 5 minutes.
	MaxWait = 5 * time.Minute
	// ExtensionURI names the IACP extension the bridge's cards declare: its params carry the
	// mesh agent id and the peer id that signs the card.
	ExtensionURI = "https://github.com/iacp-node/iacp-node/blob/main/docs/a2a.md#extension"
)

// PayloadKey is the key of the IACP payload under which the A2A ids travel (message_id,
// context_id, task_id, and on answers the task's state).
const PayloadKey = "a2a"
