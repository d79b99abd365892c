package pubsub

import (
	"slices"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/peer"
)

// State is an agent's liveness as this node sees it.
type State string

// Liveness states. Alive, busy, draining and offline are what the agent last announced;
// suspect, stuck and gone are what this node concluded from silence or a lost connection.
const (
	StateAlive    State = "alive"    // beating, accepting work
	StateBusy     State = "busy"     // beating, at capacity
	StateDraining State = "draining" // beating, finishing its work, accepting none
	StateSuspect  State = "suspect"  // missed SuspectAfter beats, or its connection dropped and the next beat did not come
	StateStuck    State = "stuck"    // silent for StuckAfter (draft: 600 s); its work MAY be reassigned
	StateOffline  State = "offline"  // said it left
	StateGone     State = "gone"     // forgotten after ForgetAfter of silence; only in a Transition
)

// AgentState is one row of the liveness table.
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
	// Staleness is how long the agent's silence may last before this node suspects it: the
	// suspect-after count of the interval it is judged on, its announced mesh beat unless
	// Watched. It is how stale this row may be.
	Staleness time.Duration

	sent               time.Time   // timestamp of the beat recorded
	lastID             string      // message id of the beat recorded
	lost               bool        // the connection to its peer dropped after its last beat
	noted              bool        // in Liveness.pending: its deadline came closer (due.go)
	suspected          time.Time   // when this node made it suspect
	older, newer       *AgentState // neighbours in the table's order of LastSeen, for eviction
	peerPrev, peerNext *AgentState // neighbours among the rows of the same peer (byPeer)
}

// Transition is a change of an agent's state, delivered to subscribers as a KindTransition
// item. From is "" the first time an agent is heard.
type Transition struct {
	AgentID string
	PeerID  peer.ID
	From    State
	To      State
	At      time.Time
	Reason  string
}

// LivenessConfig configures a Liveness; zero fields take the package defaults.
type LivenessConfig struct {
	Interval     time.Duration // expected beat of agents that announce none (DefaultHeartbeatInterval)
	SuspectAfter int           // missed beats before suspect (DefaultSuspectAfter)
	StuckAfter   time.Duration // silence before stuck (DefaultStuckAfter)
	ForgetAfter  time.Duration // silence before the row is dropped (DefaultForgetAfter)
	MaxAgents    int           // rows kept; a new agent then evicts the longest silent (DefaultMaxAgents)
	MaxWatched   int           // agents probed directly (DefaultMaxWatched); see Watch
	WatchFor     time.Duration // how long a watch lasts after the last exchange (DefaultWatchFor)
	ConnHigh     int           // connections kept before trimming; 0 unknown (see hinted)

	// MaxHealthScore saturates the local health score (DefaultMaxHealthScore); negative turns
	// local health off: the suspect timeouts are then never scaled. See Health.
	MaxHealthScore int
	// LateTick is how late a tick reported to Ticked may be before it counts as a sign of
	// local trouble (100 ms).
	LateTick time.Duration
	// RefuteGrace is how long after this node suspected an agent a beat may have been sent
	// and still refute the suspicion (a quarter of Interval, at most 1 s: the checker's tick).
	RefuteGrace time.Duration
}

// Liveness is the heartbeat state machine: the liveness table, its transitions, and the
// node's local health (see Health), which scales the suspect timeouts. It owns no goroutine and
// reads no clock: callers pass the time to every method. It is not safe for concurrent use;
// Gossip guards it with its stateMu.
type Liveness struct {
	cfg    LivenessConfig
	agents map[string]*AgentState
	byPeer map[peer.ID]*AgentState // the same rows by peer, chained by peerNext, for Disconnected
	// The rows in order of LastSeen, oldest first: a list through AgentState.older/newer.
	oldest, newest *AgentState
	evicted        uint64
	health         localHealth
	watch          map[string]*watched // the direct tier (watch.go)

	// next is the earliest time Tick can find a transition, as of its last visit of every
	// row, lowered by whatever brought a row's deadline closer since (soon); zero: visit at
	// the next Tick. nextK is the health multiplier that visit used.
	next    time.Time
	nextK   time.Duration
	pending []*AgentState // rows whose deadline came closer since the last Tick (noteCloser)
}

// NewLiveness returns an empty table.
func NewLiveness(cfg LivenessConfig) *Liveness {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultHeartbeatInterval
	}
	if cfg.SuspectAfter <= 0 {
		cfg.SuspectAfter = DefaultSuspectAfter
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = DefaultStuckAfter
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = DefaultForgetAfter
	}
	if cfg.MaxAgents <= 0 {
		cfg.MaxAgents = DefaultMaxAgents
	}
	if cfg.MaxWatched <= 0 {
		cfg.MaxWatched = DefaultMaxWatched
	}
	if cfg.WatchFor <= 0 {
		cfg.WatchFor = DefaultWatchFor
	}
	switch {
	case cfg.MaxHealthScore == 0:
		cfg.MaxHealthScore = DefaultMaxHealthScore
	case cfg.MaxHealthScore < 0:
		cfg.MaxHealthScore = 0
	}
	if cfg.LateTick <= 0 {
		cfg.LateTick = minLateTick
	}
	if cfg.RefuteGrace <= 0 {
		cfg.RefuteGrace = min(cfg.Interval/4, time.Second)
	}
	return &Liveness{cfg: cfg, agents: make(map[string]*AgentState), byPeer: make(map[peer.ID]*AgentState),
		health: localHealth{max: cfg.MaxHealthScore, lateAfter: cfg.LateTick}, watch: make(map[string]*watched)}
}

// Accepts reports whether a heartbeat for agentID signed by pid may update the table. An
// agent id is bound to the first peer heard for it; another peer may take it over only once
// the agent is offline, stuck or forgotten, so that nobody can declare someone else offline.
func (l *Liveness) Accepts(agentID string, pid peer.ID) bool {
	a, ok := l.agents[agentID]
	return !ok || a.PeerID == pid || a.State == StateOffline || a.State == StateStuck
}

// Heard is one received heartbeat, as Observe takes it.
type Heard struct {
	AgentID   string
	PeerID    peer.ID
	Payload   protocol.HeartbeatPayload
	Interval  time.Duration // the sender's announced beat; 0 for the configured default
	Sent      time.Time     // envelope.timestamp
	MessageID string        // envelope.message_id, to order beats sent in the same millisecond
}

// Observe records a heartbeat received at now. It returns the transitions it caused, and false
// if the heartbeat was refused (see Accepts). A beat sent before the last one recorded (gossip
// does not preserve order) changes nothing, so that "draining" overtaken by "offline" does not
// resurrect the agent; a later beat of the same peer moves any state, offline included (an
// agent that left and started again is alive at its first beat).
//
// A beat from an agent not in the table, when the table holds MaxAgents rows, first evicts the
// row heard from longest ago: its "gone" transition comes first. A beat that ends a suspicion
// this node raised, sent before the suspicion or within RefuteGrace after it, refutes it: the
// transition says so and Health counts it, without raising the score (the beat's timestamp is
// its signer's to choose).
func (l *Liveness) Observe(h Heard, now time.Time) (trs []Transition, ok bool) {
	if !l.Accepts(h.AgentID, h.PeerID) {
		return nil, false
	}
	if h.Interval <= 0 {
		h.Interval = l.cfg.Interval
	}
	a, known := l.agents[h.AgentID]
	if !known {
		if len(l.agents) >= l.cfg.MaxAgents {
			trs = append(trs, l.evictOldest(now))
		}
		a = &AgentState{AgentID: h.AgentID}
		l.agents[h.AgentID] = a
	} else if a.PeerID == h.PeerID && older(h, a) {
		return nil, true
	}
	if !known || a.PeerID != h.PeerID {
		l.unindex(a)
		a.PeerID = h.PeerID
		l.index(a)
	}
	reason := "heartbeat"
	if a.State == StateSuspect && h.Sent.Before(a.suspected.Add(l.cfg.RefuteGrace)) {
		l.health.refuted()
		reason = refutation(h.Sent.Sub(a.suspected))
	}
	from, to := a.State, State(h.Payload.Status)
	a.PeerID, a.State, a.LastSeen, a.sent, a.lastID, a.lost = h.PeerID, to, now, h.Sent, h.MessageID, false
	a.Load, a.ActiveTasks, a.Version, a.Interval = h.Payload.Load, h.Payload.ActiveTasks, h.Payload.Version, h.Interval
	l.touch(a)
	l.soon(a, now)
	if from != to {
		trs = append(trs, Transition{AgentID: h.AgentID, PeerID: h.PeerID, From: from, To: to, At: now, Reason: reason})
	}
	return trs, true
}

// refutation is the reason of a suspicion's end by a beat sent d after it (d < 0: before it).
func refutation(d time.Duration) string {
	d = d.Round(time.Millisecond)
	if d < 0 {
		return "heartbeat sent " + (-d).String() + " before the suspicion: this node was late"
	}
	return "heartbeat sent " + d.String() + " after the suspicion, within the refute grace: this node was late"
}

// older reports whether h was sent before the beat recorded in a: by timestamp (milliseconds),
// then by message id, which for our builders is a UUIDv7, ordered by its own clock reading.
func older(h Heard, a *AgentState) bool {
	if c := h.Sent.Compare(a.sent); c != 0 {
		return c < 0
	}
	return h.MessageID < a.lastID
}

// Disconnected records that the direct connection to pid dropped. A lost connection is a
// hint, not proof: connection managers close healthy connections every day, and the agent's
// beats reach this node through other gossip peers. Tick confirms it by silence: an agent of
// pid that was beating becomes suspect when its next beat is half an interval late, instead
// of after SuspectAfter missed beats. A beat heard after the loss cancels the hint (a beat
// that was already on its way then delays the suspicion to the usual SuspectAfter).
//
// A watched agent of pid is also probed at the next Due, without waiting for its interval: the
// probe's answer confirms it alive (and cancels the hint) well before the hint's deadline.
func (l *Liveness) Disconnected(pid peer.ID) {
	for a := l.byPeer[pid]; a != nil; a = a.peerNext {
		if beating(a.State) {
			a.lost = true
			l.noteCloser(a) // its deadline came closer
		}
		if w, ok := l.watch[a.AgentID]; ok && w.peer == pid {
			w.urgent = true
		}
	}
}

// Forget drops agentID's row when pid speaks for it, and returns the transition to
// StateGone with reason; ok is false when the table has no such row.
func (l *Liveness) Forget(agentID string, pid peer.ID, now time.Time, reason string) (tr Transition, ok bool) {
	a, known := l.agents[agentID]
	if !known || a.PeerID != pid {
		return Transition{}, false
	}
	tr = l.move(a, StateGone, now, reason)
	l.remove(a)
	return tr, true
}

// Ticked records one tick of the caller's periodic timers (the checker's, the beat loop's),
// scheduled for scheduled and run at actual: a tick later than LateTick raises the local
// health score, and ticks on time lower it slowly (see Health).
func (l *Liveness) Ticked(scheduled, actual time.Time) { l.health.tick(scheduled, actual) }

// Queued records that a heartbeat spent d in this node's own gossip queues, a sign of local
// trouble when longer than LateTick (see Health).
func (l *Liveness) Queued(d time.Duration) { l.health.queued(d) }

// PublishFailed records that one of this node's own heartbeats could not be published, a
// sign of local trouble (see Health).
func (l *Liveness) PublishFailed() { l.health.publishFailed() }

// Health returns the local health.
func (l *Liveness) Health() Health { return l.health.snapshot() }

// Evicted returns how many rows were evicted because the table was full.
func (l *Liveness) Evicted() uint64 { return l.evicted }

func beating(s State) bool { return s == StateAlive || s == StateBusy || s == StateDraining }

// Agent returns one row.
func (l *Liveness) Agent(id string) (AgentState, bool) {
	a, ok := l.agents[id]
	if !ok {
		return AgentState{}, false
	}
	return l.copy(a), true
}

// copy returns the row without its links into the table, with Watched and Staleness.
func (l *Liveness) copy(a *AgentState) AgentState {
	c := *a
	c.older, c.newer = nil, nil
	iv := a.Interval
	if w, ok := l.watch[a.AgentID]; ok && w.peer == a.PeerID && w.refused.IsZero() {
		c.Watched, iv = true, min(iv, l.cfg.Interval)
	}
	c.Staleness = time.Duration(l.cfg.SuspectAfter) * iv
	return c
}

// Agents returns every row, ordered by agent id.
func (l *Liveness) Agents() []AgentState {
	out := make([]AgentState, 0, len(l.agents))
	for _, id := range l.sortedIDs() {
		out = append(out, l.copy(l.agents[id]))
	}
	return out
}

// Load returns an agent's announced load, whether it takes work (alive or busy), and whether
// it is known at all: what discovery needs to rank candidates.
func (l *Liveness) Load(id string) (load float64, alive, known bool) {
	a, ok := l.agents[id]
	if !ok {
		return 0, false, false
	}
	return a.Load, a.State == StateAlive || a.State == StateBusy, true
}

// Len returns how many agents are in the table.
func (l *Liveness) Len() int { return len(l.agents) }

func (l *Liveness) sortedIDs() []string {
	ids := make([]string, 0, len(l.agents))
	for id := range l.agents {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, strings.Compare)
	return ids
}
