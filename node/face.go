package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// The mesh as the node's users see it: the types of liveness, events, discovery and the
// outbox that the node's methods hand out. They are the types of the packages the node
// composes (pubsub, discovery, store), named here so that its users (the local API, the
// simulator, embedding agents) depend on node and protocol alone.
type (
	// AgentState is what heartbeats say of one agent: its liveness state, load, last beat.
	AgentState = pubsub.AgentState
	// State is an agent's liveness state: alive, busy, draining, suspect, stuck or offline.
	State = pubsub.State
	// Transition is one agent's move from one liveness state to another.
	Transition = pubsub.Transition
	// EventKind is the kind of an item of the event stream (EventKind* constants).
	EventKind = pubsub.Kind
	// EventFilter selects the items of an event subscription; the zero filter selects all.
	EventFilter = pubsub.Filter
	// EventItem is one item of the event stream: a broadcast event, a group message, a
	// heartbeat or a liveness transition.
	EventItem = pubsub.Item
	// Subscription is an event subscription (Node.Subscribe): read C, and Cancel when done.
	Subscription = pubsub.Subscription
	// Record is an agent's signed record in the DHT: its peer, addresses and manifest.
	Record = discovery.Record
	// Match is one answer of a capability query, with its rank inputs (load, latency).
	Match = discovery.Match
	// DiscoveryStatus says how far the node's DHT got: bootstrapped, table size, published.
	DiscoveryStatus = discovery.Status
)

// MaxMeshInterval is the slowest a node stretches its beat on the heartbeat topic to, in a
// mesh larger than its mesh budget (Config.MeshBudget, docs/scale.md).
const MaxMeshInterval = pubsub.MaxMeshInterval

// The liveness states (AgentState.State, Transition.From and To).
const (
	StateAlive    = pubsub.StateAlive
	StateBusy     = pubsub.StateBusy
	StateDraining = pubsub.StateDraining
	StateSuspect  = pubsub.StateSuspect
	StateStuck    = pubsub.StateStuck
	StateOffline  = pubsub.StateOffline
)

// The kinds of the event stream (EventItem.Kind, EventFilter.Kinds).
const (
	EventKindEvent      = pubsub.KindEvent
	EventKindGroup      = pubsub.KindGroup
	EventKindHeartbeat  = pubsub.KindHeartbeat
	EventKindTransition = pubsub.KindTransition
)

// MaxProviders bounds the agents one capability lookup returns.
const MaxProviders = discovery.DefaultMaxProviders

// errGossipOff and errDiscoveryOff are what the mesh methods return when the part they need
// is off on this node.
func errGossipOff(what string) error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "%s needs gossip, which is off on this node: start it with gossip on", what)
}

func errDiscoveryOff(what string) error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "%s needs discovery, which is off on this node: start it with discovery on to query the DHT", what)
}

// watch tells gossip that this node deals with agentID on p, which it then probes directly
// and judges on its own heartbeat interval (pubsub.Gossip.Watch, docs/scale.md): every agent
// it exchanges a message with, and every agent discovery returns. A message that arrives
// while the node is starting, before its gossip runs, watches nobody.
func (n *Node) watch(agentID string, p peer.ID) {
	if g := n.watcher.Load(); g != nil {
		g.Watch(agentID, p)
	}
}

// GossipOn reports whether the node runs gossip: heartbeats, liveness and broadcasts.
func (n *Node) GossipOn() bool { return n.gossip != nil }

// DiscoveryOn reports whether the node runs the DHT: records, resolve and capability queries.
func (n *Node) DiscoveryOn() bool { return n.disc != nil }

// Agents returns the liveness table: every agent whose heartbeat this node heard, with its
// state. It is empty when gossip is off.
func (n *Node) Agents() []AgentState {
	if n.gossip == nil {
		return nil
	}
	return n.gossip.Agents()
}

// Agent returns one row of the liveness table.
func (n *Node) Agent(agentID string) (AgentState, bool) {
	if n.gossip == nil {
		return AgentState{}, false
	}
	return n.gossip.Agent(agentID)
}

// Subscribe subscribes to the event stream: broadcasts, group messages, heartbeats and
// liveness transitions that f selects, buffered up to buffer items (0: the default); items
// that do not fit are dropped and counted. Cancel the subscription when done.
func (n *Node) Subscribe(f EventFilter, buffer int) (*Subscription, error) {
	if n.gossip == nil {
		return nil, errGossipOff("an event subscription")
	}
	return n.gossip.Subscribe(f, buffer)
}

// Broadcast publishes an event to every agent of the mesh, signed by this node.
func (n *Node) Broadcast(ctx context.Context, ev protocol.EventPayload, opts ...protocol.Option) (*protocol.Message, error) {
	if n.gossip == nil {
		return nil, errGossipOff("a broadcast")
	}
	return n.gossip.Broadcast(ctx, ev, opts...)
}

// SendToGroup publishes a message to the agents that joined the capability group.
func (n *Node) SendToGroup(ctx context.Context, capability string, intent protocol.Intent, payload any, opts ...protocol.Option) (*protocol.Message, error) {
	if n.gossip == nil {
		return nil, errGossipOff("a group message")
	}
	return n.gossip.SendToGroup(ctx, capability, intent, payload, opts...)
}

// GossipPeers returns how many peers this node's gossip has on the heartbeat topic and on
// the broadcast topic: 0 means what it publishes there reaches nobody yet. It does not wait
// for gossipsub's event loop (see pubsub.Gossip.TopicPeers).
func (n *Node) GossipPeers() (heartbeat, broadcast int) {
	if n.gossip == nil {
		return 0, 0
	}
	return n.gossip.TopicPeers()
}

// Resolve finds an agent's record in the DHT (or the node's cache of verified records).
func (n *Node) Resolve(ctx context.Context, agentID string) (Record, error) {
	if n.disc == nil {
		return Record{}, errDiscoveryOff("resolving an agent")
	}
	r, err := n.disc.Resolve(ctx, agentID)
	if err == nil && !r.Left {
		n.watch(r.AgentID, r.PeerID)
	}
	return r, err
}

// Query runs a capability query against the DHT and ranks the matches.
func (n *Node) Query(ctx context.Context, q protocol.CapabilityQuery) ([]Match, error) {
	if n.disc == nil {
		return nil, errDiscoveryOff("a capability query")
	}
	ms, err := n.disc.Query(ctx, q)
	for _, m := range ms {
		n.watch(m.Record.AgentID, m.Record.PeerID)
	}
	return ms, err
}

// FindByCapability returns the records of up to MaxProviders agents that provide one
// capability (kind tool, model or domain).
func (n *Node) FindByCapability(ctx context.Context, kind, name string) ([]Record, error) {
	if n.disc == nil {
		return nil, errDiscoveryOff("a capability lookup")
	}
	rs, err := n.disc.FindByCapability(ctx, kind, name)
	for _, r := range rs {
		n.watch(r.AgentID, r.PeerID)
	}
	return rs, err
}

// DiscoveryStatus returns the DHT's progress; ok is false when discovery is off.
func (n *Node) DiscoveryStatus() (st DiscoveryStatus, ok bool) {
	if n.disc == nil {
		return DiscoveryStatus{}, false
	}
	return n.disc.Status(), true
}

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
		pi.Path = n.paths.path(p, conns)
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
