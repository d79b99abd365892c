package node

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// The types of the mesh's answers at the node's face (face.go): liveness, events and
// discovery. They are node's own, copied at the face from the parts that keep them (pubsub,
// discovery), so that the node's users (the local API, the simulator, embedding agents)
// depend on node and protocol alone, and the parts may change their shapes behind it. A
// type with the fields of its part's (Record, the stats) converts in one expression, which
// stops compiling when the part's type changes.

// State is an agent's liveness state: alive, busy, draining, suspect, stuck or offline (and
// gone, in a Transition only).
type State string

// The liveness states (AgentState.State, Transition.From and To).
const (
	StateAlive    = State(pubsub.StateAlive)    // beating, accepting work
	StateBusy     = State(pubsub.StateBusy)     // beating, at capacity
	StateDraining = State(pubsub.StateDraining) // beating, finishing its work, accepting none
	StateSuspect  = State(pubsub.StateSuspect)  // missed its beats, or its connection dropped and the next beat did not come
	StateStuck    = State(pubsub.StateStuck)    // silent for long; its work may be reassigned
	StateOffline  = State(pubsub.StateOffline)  // said it left
	StateGone     = State(pubsub.StateGone)     // forgotten after a long silence; only in a Transition
)

// AgentState is what heartbeats say of one agent: one row of the liveness table.
type AgentState struct {
	AgentID     string
	PeerID      peer.ID
	State       State
	LastSeen    time.Time     // when its last heartbeat was received
	Load        float64       // 0..1, as announced
	ActiveTasks int           // as announced
	Version     string        // as announced
	Interval    time.Duration // its heartbeat interval, as announced (or the local default)
	// Watched says this node probes the agent directly (it exchanged messages with it or
	// discovered it; docs/scale.md): its silence is judged on this node's own interval.
	Watched bool
	// Staleness is how long the agent's silence may last before this node suspects it: how
	// stale this row may be.
	Staleness time.Duration
}

// Transition is one agent's move from one liveness state to another, as this node saw it.
type Transition struct {
	AgentID string
	PeerID  peer.ID
	From    State
	To      State
	At      time.Time
	Reason  string
}

// EventKind is the kind of an item of the event stream (EventKind* constants).
type EventKind int

// The kinds of the event stream (EventItem.Kind, EventFilter.Kinds).
const (
	EventKindEvent      = EventKind(pubsub.KindEvent)      // a broadcast event; Event is set
	EventKindGroup      = EventKind(pubsub.KindGroup)      // a message to one of the agent's groups; Group is set
	EventKindHeartbeat  = EventKind(pubsub.KindHeartbeat)  // a heartbeat; Heartbeat is set
	EventKindTransition = EventKind(pubsub.KindTransition) // a liveness transition; Transition is set, Message is nil
)

// String names the kind: event, group, heartbeat or transition.
func (k EventKind) String() string { return pubsub.Kind(k).String() }

// EventFilter selects the items of an event subscription; the zero filter selects all.
type EventFilter struct {
	Kinds   []EventKind // empty: every kind
	Group   string      // non-empty: only group items of this capability (other kinds pass)
	AgentID string      // non-empty: only items from or about this agent
}

// EventItem is one item of the event stream: a broadcast event, a group message, a
// heartbeat or a liveness transition. Message is the verified IACP document, shared with
// the node's other subscribers: read it, do not modify it (Clone it to keep a copy).
type EventItem struct {
	Kind       EventKind
	Message    *protocol.Message
	Author     peer.ID // the gossip author, equal to Message.Envelope.Sender.PeerID
	Event      protocol.EventPayload
	Group      string // the capability of a group item
	Heartbeat  protocol.HeartbeatPayload
	Transition Transition
}

// Subscription is an event subscription (Node.Subscribe): read C, and Cancel when done. A
// reader that falls behind loses items, counted by Dropped; it never blocks the node.
type Subscription struct {
	sub *pubsub.Subscription
	ch  chan *EventItem
}

// C returns the channel of items. It is closed by Cancel and when the node closes.
func (s *Subscription) C() <-chan *EventItem { return s.ch }

// Dropped returns how many items were lost because the channel was full.
func (s *Subscription) Dropped() uint64 { return s.sub.Dropped() }

// Cancel stops the subscription and closes its channel. It is safe to call twice.
func (s *Subscription) Cancel() { s.sub.Cancel() }

// Record is an agent's signed record in the DHT: a statement by the peer PeerID that it
// hosts the agent AgentID, reachable at Addrs, with the capabilities of Manifest.
type Record struct {
	AgentID  string
	PeerID   peer.ID
	Addrs    []ma.Multiaddr // the peer's addresses when the record was published
	Manifest protocol.Manifest
	// Seq orders records of one agent: the highest wins (the publisher's unix time in ns).
	Seq     uint64
	Expires time.Time
	// Left says the agent left the mesh (a clean shutdown): the record is a tombstone.
	Left bool
	// Cert is the agent certificate that binds AgentID to PeerID in authority mode (a compact
	// JWS); empty when the node has none.
	Cert string
}

// AddrInfo returns the peer id and addresses, ready for Connect.
func (r Record) AddrInfo() peer.AddrInfo { return peer.AddrInfo{ID: r.PeerID, Addrs: r.Addrs} }

// Match is one answer of a capability query, with its rank inputs (load, latency).
type Match struct {
	Record Record
	// PreferredMatches counts the query's preferred capabilities the manifest has.
	PreferredMatches int
	// Load is the live load the agent's heartbeats report; meaningful when LoadKnown.
	Load      float64
	LoadKnown bool
	// Latency is the measured round trip to the agent's peer; meaningful when LatencyKnown.
	Latency      time.Duration
	LatencyKnown bool
}

// Manifest is the matched agent's manifest.
func (m Match) Manifest() protocol.Manifest { return m.Record.Manifest }

// DiscoveryStatus says how far the node's DHT got: bootstrapped, table size, published.
type DiscoveryStatus struct {
	Mode         string // "server" or "client"
	Bootstrapped bool   // a bootstrap round reached a peer (or none is configured and the table is not empty)
	// BootstrapConfigured and BootstrapAnswered count the configured bootstrap peers and
	// those that answered; BootstrapPeers tells, per configured peer, how its dials went.
	BootstrapConfigured int
	BootstrapAnswered   int
	BootstrapPeers      []BootstrapPeerStatus
	// Rounds counts bootstrap rounds, FailedRounds those in a row in which no peer answered;
	// NextRound is when the next is due (zero when none is scheduled).
	Rounds           int
	FailedRounds     int
	NextRound        time.Time
	RoutingTableSize int
	// LastError is the last bootstrap or publish error ("" when none) and when it happened.
	LastError   string
	LastErrorAt time.Time
	// AgentID, Seq and Published describe the agent's own record; Left is true after it left.
	AgentID      string
	Seq          uint64
	Published    time.Time
	Left         bool
	CachedAgents int // agents in the cache of verified records
}

// BootstrapPeerStatus is one configured bootstrap peer: whether it answered its last dial,
// the error of the last dial that failed, and when the last dial began.
type BootstrapPeerStatus struct {
	Peer      peer.AddrInfo
	Answered  bool
	LastError string
	LastTry   time.Time
}

// GossipHealth is gossip's view of this node's own timeliness (Lifeguard): a Score above 0
// means it found itself slow and waits longer before it suspects others.
type GossipHealth struct {
	Score         int           // 0 (healthy) .. MaxScore
	MaxScore      int           // the saturation (0 when local health is off)
	Multiplier    int           // Score+1: how many times the usual silence this node waits before suspecting
	LateAfter     time.Duration // a tick later than this is a sign of trouble
	WorstLateness time.Duration // the latest recent tick of the node's timers

	LateTicks       uint64 // ticks later than LateAfter
	OnTimeTicks     uint64 // ticks within LateAfter
	PublishFailures uint64 // own heartbeats that could not be published
	SlowQueues      uint64 // heartbeats that spent longer than LateAfter in this node's gossip queues
	Refuted         uint64 // suspicions withdrawn by a beat sent before them
}

// GossipStats counts what gossip's validators refused and what its liveness table holds.
type GossipStats struct {
	Rejected   uint64 // invalid: the relayer is penalised
	Ignored    uint64 // dropped without penalty (rate when relayed, expiry at the boundary, ...)
	Evicted    uint64 // liveness rows evicted because the table was full (max_agents)
	OwnRelayed uint64 // copies of this node's own earlier messages that peers relayed back
	Agents     int    // rows in the liveness table (the agents heard, this one aside)
	MeshBeats  uint64 // beats this node published on the heartbeat topic
	// MeshInterval is what this node's beats on the heartbeat topic announce: the heartbeat
	// interval up to mesh_budget agents, a multiple of it beyond (docs/scale.md).
	MeshInterval time.Duration
}

// DHTStoreStats describes the DHT's local record store: what it holds and what it dropped.
type DHTStoreStats struct {
	Entries      int    // agent, peer and provider records held
	Bytes        int64  // what they are charged: key and value bytes plus an overhead each
	Owners       int    // peers that records are charged to, this node included
	LocalEntries int    // this node's own records, never evicted
	EvictedQuota uint64 // evicted because their owner held more than its quota
	EvictedFull  uint64 // evicted because the store was full
	Refused      uint64 // puts refused because the store was full
	Expired      uint64 // agent and peer records dropped because they expired
}

// MaxMeshInterval is the slowest a node stretches its beat on the heartbeat topic to, in a
// mesh larger than its mesh budget (Config.MeshBudget, docs/scale.md).
const MaxMeshInterval = pubsub.MaxMeshInterval

// MaxProviders bounds the agents one capability lookup returns.
const MaxProviders = discovery.DefaultMaxProviders

// eventItem is it, a gossip item, as the face hands it out.
func eventItem(it *pubsub.Item) *EventItem {
	return &EventItem{Kind: EventKind(it.Kind), Message: it.Message, Author: it.Author, Event: it.Event,
		Group: it.Group, Heartbeat: it.Heartbeat, Transition: transition(it.Transition)}
}

func transition(t pubsub.Transition) Transition {
	return Transition{AgentID: t.AgentID, PeerID: t.PeerID, From: State(t.From), To: State(t.To), At: t.At, Reason: t.Reason}
}

// filter is f as gossip reads it.
func (f EventFilter) filter() pubsub.Filter {
	out := pubsub.Filter{Group: f.Group, AgentID: f.AgentID}
	for _, k := range f.Kinds {
		out.Kinds = append(out.Kinds, pubsub.Kind(k))
	}
	return out
}

// offer takes it into the subscription's channel unless the channel is full. Gossip calls
// it under its lock (pubsub.Gossip.SubscribeFunc), so the channel has one writer and room
// seen is room kept.
func (s *Subscription) offer(it *pubsub.Item) bool {
	if len(s.ch) == cap(s.ch) {
		return false
	}
	s.ch <- eventItem(it)
	return true
}

func agentState(a pubsub.AgentState) AgentState {
	return AgentState{AgentID: a.AgentID, PeerID: a.PeerID, State: State(a.State), LastSeen: a.LastSeen, Load: a.Load,
		ActiveTasks: a.ActiveTasks, Version: a.Version, Interval: a.Interval, Watched: a.Watched, Staleness: a.Staleness}
}

// agentStates converts the liveness table; nil stays nil (gossip off).
func agentStates(as []pubsub.AgentState) []AgentState {
	if as == nil {
		return nil
	}
	out := make([]AgentState, len(as))
	for i, a := range as {
		out[i] = agentState(a)
	}
	return out
}

func records(rs []discovery.Record) []Record {
	if rs == nil {
		return nil
	}
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = Record(r)
	}
	return out
}

func matches(ms []discovery.Match) []Match {
	if ms == nil {
		return nil
	}
	out := make([]Match, len(ms))
	for i, m := range ms {
		out[i] = Match{Record: Record(m.Record), PreferredMatches: m.PreferredMatches, Load: m.Load, LoadKnown: m.LoadKnown,
			Latency: m.Latency, LatencyKnown: m.LatencyKnown}
	}
	return out
}

func discoveryStatus(st discovery.Status) DiscoveryStatus {
	out := DiscoveryStatus{Mode: st.Mode, Bootstrapped: st.Bootstrapped, BootstrapConfigured: st.BootstrapConfigured,
		BootstrapAnswered: st.BootstrapAnswered, Rounds: st.Rounds, FailedRounds: st.FailedRounds, NextRound: st.NextRound,
		RoutingTableSize: st.RoutingTableSize, LastError: st.LastError, LastErrorAt: st.LastErrorAt, AgentID: st.AgentID,
		Seq: st.Seq, Published: st.Published, Left: st.Left, CachedAgents: st.CachedAgents}
	for _, p := range st.BootstrapPeers {
		out.BootstrapPeers = append(out.BootstrapPeers, BootstrapPeerStatus(p))
	}
	return out
}
