package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// The mesh as the node's users see it: liveness, events, discovery, peers, durable records
// and approvals. Each method hands the call to the part that owns it; the types of the
// answers are node's own (meshtypes.go). A part switched off answers as its do-nothing
// stand-in does: an empty liveness table, no peers on the topics, CAPABILITY_MISMATCH for a
// broadcast, a subscription or a lookup.

// GossipOn reports whether the node runs gossip: heartbeats, liveness and broadcasts.
func (n *Node) GossipOn() bool { return n.mesh.gossip().on() }

// DiscoveryOn reports whether the node runs the DHT: records, resolve and capability queries.
func (n *Node) DiscoveryOn() bool { return n.mesh.disc.on() }

// Agents returns the liveness table: every agent whose heartbeat this node heard, with its
// state. It is empty when gossip is off.
func (n *Node) Agents() []AgentState { return agentStates(n.mesh.gossip().Agents()) }

// Agent returns one row of the liveness table.
func (n *Node) Agent(agentID string) (AgentState, bool) {
	a, ok := n.mesh.gossip().Agent(agentID)
	return agentState(a), ok
}

// Subscribe subscribes to the event stream: broadcasts, group messages, heartbeats and
// liveness transitions that f selects, buffered up to buffer items (0: the default); items
// that do not fit are dropped and counted. Cancel the subscription when done.
func (n *Node) Subscribe(f EventFilter, buffer int) (*Subscription, error) {
	return n.mesh.subscribe(f, buffer)
}

// Broadcast publishes an event to every agent of the mesh, signed by this node.
func (n *Node) Broadcast(ctx context.Context, ev protocol.EventPayload, opts ...protocol.Option) (*protocol.Message, error) {
	return n.mesh.gossip().Broadcast(ctx, ev, opts...)
}

// SendToGroup publishes a message to the agents that joined the capability group.
func (n *Node) SendToGroup(ctx context.Context, capability string, intent protocol.Intent, payload any, opts ...protocol.Option) (*protocol.Message, error) {
	return n.mesh.gossip().SendToGroup(ctx, capability, intent, payload, opts...)
}

// GossipPeers returns how many peers this node's gossip has on the heartbeat topic and on
// the broadcast topic: 0 means what it publishes there reaches nobody yet. It does not wait
// for gossipsub's event loop (see pubsub.Gossip.TopicPeers).
func (n *Node) GossipPeers() (heartbeat, broadcast int) { return n.mesh.gossip().TopicPeers() }

// Ask publishes a query to a capability group (or every agent) and collects the answers
// correlated to it until the deadline, the count, or every expected agent answered, or ctx
// ends. Answers pass every check a direct message passes (signature, trust, replay), and are
// charged to the answering peer's message rate; one answer per agent is kept. An answer that
// comes after the query closed is receipted and dropped.
func (n *Node) Ask(ctx context.Context, o AskOptions) (*AskResult, error) { return n.mesh.ask(ctx, o) }

// Resolve finds an agent's record in the DHT (or the node's cache of verified records).
func (n *Node) Resolve(ctx context.Context, agentID string) (Record, error) {
	return n.mesh.resolve(ctx, agentID)
}

// Query runs a capability query against the DHT and ranks the matches.
func (n *Node) Query(ctx context.Context, q protocol.CapabilityQuery) ([]Match, error) {
	return n.mesh.query(ctx, q)
}

// FindByCapability returns the records of up to MaxProviders agents that provide one
// capability (kind tool, model or domain).
func (n *Node) FindByCapability(ctx context.Context, kind, name string) ([]Record, error) {
	return n.mesh.find(ctx, kind, name)
}

// DiscoveryStatus returns the DHT's progress; ok is false when discovery is off.
func (n *Node) DiscoveryStatus() (st DiscoveryStatus, ok bool) {
	return discoveryStatus(n.mesh.disc.Status()), n.mesh.disc.on()
}

// PutRecord stores v as the durable record id of kind (records.go) and returns once it is on
// disk.
func (n *Node) PutRecord(kind, id string, v []byte) error { return n.durable.putRecord(kind, id, v) }

// Records returns every durable record of kind, by id.
func (n *Node) Records(kind string) (map[string][]byte, error) { return n.durable.records(kind) }

// DeleteRecord removes a durable record.
func (n *Node) DeleteRecord(kind, id string) error { return n.durable.deleteRecord(kind, id) }

// PeerInfo is one connected peer: its id, the addresses of its connections, the path they
// take (PathDirect, PathRelayed or PathHolePunched), and the measured round-trip latency (0
// when not measured yet).
type PeerInfo struct {
	ID      peer.ID
	Addrs   []ma.Multiaddr
	Path    string
	Latency time.Duration
}

// Peers returns the peers this node is connected to.
func (n *Node) Peers() []PeerInfo {
	nw := n.host.Network()
	ids := nw.Peers()
	out := make([]PeerInfo, 0, len(ids))
	for _, p := range ids {
		pi := PeerInfo{ID: p, Latency: n.host.Peerstore().LatencyEWMA(p)}
		conns := nw.ConnsToPeer(p)
		for _, c := range conns {
			pi.Addrs = append(pi.Addrs, c.RemoteMultiaddr())
		}
		pi.Path = n.peers.paths.path(p, conns)
		out = append(out, pi)
	}
	return out
}

// PeerCount returns how many peers this node is connected to.
func (n *Node) PeerCount() int { return len(n.host.Network().Peers()) }

// Connect dials a peer and keeps its addresses; an agent id it speaks for can then be
// reached through AddPeer.
func (n *Node) Connect(ctx context.Context, ai peer.AddrInfo) error { return n.host.Connect(ctx, ai) }

// ListenAddrs returns the addresses the node's host listens on, without the /p2p part
// (Addrs has it).
func (n *Node) ListenAddrs() []ma.Multiaddr { return n.host.Addrs() }

// Crash stops the node the way a crash looks to its peers: its host goes first, so every
// connection drops at once and nothing is announced (no leave, no final heartbeat); then the
// node closes as Close does, and what Close reports of the parts that lost their host is
// returned too. It is for simulators and failure tests: an agent that stops calls Close.
func (n *Node) Crash() error {
	_ = n.host.Close()
	return n.Close()
}

// ValidateGroup checks a capability's name as the name of its group (SendToGroup, a gossip
// topic): 1 to 64 letters, digits, '.', '_', '-' or ':', starting with a letter or digit.
func ValidateGroup(capability string) error { return pubsub.ValidateCapability(capability) }

// ApprovalDesk is the face of the messages held for approval (docs/coordination.md): the
// held messages, the events of their decisions, and the decisions. Node.Approvals hands it
// out; it holds nothing of its own.
type ApprovalDesk struct{ n *Node }

// Approvals returns the face of the messages held for approval.
func (n *Node) Approvals() ApprovalDesk { return ApprovalDesk{n} }

// Events returns the approval events kept with a Seq above after (the last 256), the Seq of
// the last event, and a channel closed at the next one.
func (d ApprovalDesk) Events(after uint64) ([]ApprovalEvent, uint64, <-chan struct{}) {
	return d.n.approvals.eventsAfter(after)
}

// List lists the messages held for approval, oldest first: those waiting for a decision and
// those approved and not yet taken by the outbox. Empty without durable delivery.
func (d ApprovalDesk) List() ([]HeldMessage, error) { return d.n.approvals.list() }

// Approve approves the held message id on behalf of by (who decides: 1 to 128 printable
// characters) and hands it to the outbox, which sends it as any Send does, with its own id.
// It returns the first attempt's outcome as Send does: nil once delivered or queued, or the
// recipient's refusal (which the sending agent is told of too). Approving a message approved
// before does nothing more. A message not held is ErrNotHeld (PAYLOAD_INVALID: it was decided
// or expired already, or never held); one whose TTL passed is TIMEOUT.
func (d ApprovalDesk) Approve(ctx context.Context, id, by string) error {
	return d.n.approvals.approve(ctx, id, by)
}

// Reject rejects the held message id on behalf of by, for reason (may be empty, at most 1
// KiB): it is dropped unsent, the audit log records who and why, and the sending agent gets
// a PERMISSION_DENIED error correlated to it (to Request, or in its inbox). A message approved
// already cannot be rejected (PERMISSION_DENIED).
func (d ApprovalDesk) Reject(_ context.Context, id, by, reason string) error {
	return d.n.approvals.reject(id, by, reason)
}

// HoldLocal charges size bytes that the local agent is sending the node (a request body the
// local API is about to read, and what the node builds from it) to the node-wide budget, as
// the share of one more peer, so that large bodies posted at once take their turn with the
// frames peers send rather than add to them. It waits until they fit or ctx ends, and returns
// what gives them back once the request is handled.
func (n *Node) HoldLocal(ctx context.Context, size int64) (release func(), err error) {
	return n.wire.holdLocal(ctx, size)
}

// Send delivers m to its recipient and returns once the recipient's node has acknowledged it
// (a receipt, or for a request its reply), or with the recipient's refusal as an
// *protocol.Error. m may leave out what the node fills in (see protocol.Builder.Seal); an
// unsigned m is sealed and signed here. A message to the node's own agent is delivered
// locally (local.go), signed, audited and receipted like any other.
//
// A recipient that nothing knows (no directory entry, trust pin or DHT record: a mistyped id,
// most often) is refused at once with AGENT_NOT_FOUND, unless QueueUnknown is given.
//
// With durable delivery on, m is stored before anything else; when the recipient cannot be
// reached yet, Send returns nil once m is safely queued, and the node retries until a receipt
// or the TTL (then the agent gets a TIMEOUT error correlated to m). A full queue is refused
// with RATE_LIMITED. Submit says which of these happened.
//
// An m whose security member requires approval is held in the store instead, unsent, and Send
// returns nil once it is (docs/coordination.md "Approval"): Approve sends it, Reject drops it
// and the agent gets a PERMISSION_DENIED error correlated to it.
func (n *Node) Send(ctx context.Context, m *protocol.Message, opts ...SendOption) error {
	return n.wire.send(ctx, m, opts...)
}

// Submit is Send, and says what became of m: delivered, queued in the outbox, or held for
// approval.
func (n *Node) Submit(ctx context.Context, m *protocol.Message, opts ...SendOption) (Outcome, error) {
	return n.wire.submit(ctx, m, opts...)
}

// Request sends a request and waits for the correlated response until ctx ends or the
// request's TTL passes, whichever is first; then it returns a TIMEOUT error. An `error`
// reply is returned as the message and as an *protocol.Error with its code. With durable
// delivery the request is queued like any Send and retried while Request waits; the
// request's life is its caller's: an unsigned m gets a TTL no longer than ctx's deadline,
// and a request still queued when Request returns without its answer is taken out of the
// outbox, so that it never reaches the agent after its caller gave up.
//
// A request that requires approval is held (see Send) while Request waits: approved, it is
// sent and Request returns its answer; rejected, Request returns a PERMISSION_DENIED error;
// nobody deciding within its TTL is TIMEOUT.
func (n *Node) Request(ctx context.Context, m *protocol.Message, opts ...SendOption) (*protocol.Message, error) {
	return n.wire.requestReply(ctx, m, opts...)
}

// RequestOnce is Request with one attempt and nothing kept: the request is transmitted once
// (durable delivery or not), never written to the outbox and never resent by the node. It is
// for a caller that retries or fails over by itself (package coord): with Request, an agent
// the caller gave up on would still be asked again by the outbox, behind its back. Once the
// recipient's node acknowledged the request it is durable there, as with Request.
func (n *Node) RequestOnce(ctx context.Context, m *protocol.Message, opts ...SendOption) (*protocol.Message, error) {
	return n.wire.requestOnce(ctx, m, opts...)
}

// CancelOutbox takes the message id out of the outbox (DELETE /v1/outbox/{id}): it is not
// sent again. It reports whether the outbox held it; without durable delivery there is no
// outbox, and it returns false. An attempt on the wire at that moment may still reach the
// recipient.
func (n *Node) CancelOutbox(id string) (bool, error) { return n.wire.cancelOutbox(id) }

// Handle registers h for an intent (handoff, negotiate, notify or an x- custom intent),
// replacing any earlier handler. query and health are answered by the node itself unless a
// handler is registered for them. The node serves from New on: what arrives before Handle
// goes to the inbox (with the inbox off, an event is taken as it is); WithHandler registers a
// handler before that.
func (n *Node) Handle(intent protocol.Intent, h Handler) { n.wire.handle(intent, h) }

// HandleOther registers a handler for every message no intent handler takes (events and
// requests without a handler, responses that arrive after their requester stopped waiting),
// instead of queueing them in the inbox. WithOtherHandler registers it before New serves.
func (n *Node) HandleOther(h Handler) { n.wire.handleOther(h) }
