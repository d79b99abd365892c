package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("pubsub: gossip is closed; create a new one")

// Gossip is one node's gossip layer: it publishes and validates IACP documents on the
// broadcast, heartbeat and group topics, beats, and keeps the liveness table.
//
// State has two named owners. topicMu guards the topic handles. stateMu guards the liveness
// table, the subscribers, the announced status and the closed flag; it is a leaf lock, held
// only for in-memory work and never across a network call. The connection notifiee takes no
// lock: it hands disconnects to the run goroutine through a channel.
type Gossip struct {
	h       host.Host
	b       *protocol.Builder
	cfg     config
	log     *slog.Logger
	ps      *ps.PubSub
	replay  *protocol.ReplayWindow
	limiter *limiter
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stats   struct{ rejected, ignored, ownRelayed, beats atomic.Uint64 }

	topicMu sync.Mutex
	topics  map[string]*topicHandle

	stateMu     sync.Mutex
	live        *Liveness
	subs        map[*Subscription]struct{}
	status      protocol.HeartbeatPayload
	closed      bool
	healthScore int // the local health score last logged

	beatMu  sync.Mutex // serialises heartbeats, so that offline is the last one
	leaving bool       // guarded by beatMu

	// heard: a beat of ours was published while the topic had a peer (stopGreet then ends greet);
	// greeting: greet prepares a greeting, which greetNow asks the beat loop for (see beatAs).
	heard, greeting atomic.Bool
	stopGreet       context.CancelFunc
	greetNow        chan struct{}

	// hbPeers and bcPeers count the heartbeat and broadcast topics' peers from gossipsub's peer
	// events (countPeers), so that TopicPeers need not wait for its event loop.
	hbPeers, bcPeers atomic.Int64

	serveMu     sync.Mutex // guards the probes being answered (probe.go)
	served      map[network.Stream]struct{}
	serveClosed bool

	scoreMu sync.Mutex
	scores  map[peer.ID]float64

	ownBeat    atomic.Pointer[ownBeat] // the last beat published, until it comes back (queuedelay.go)
	sealedBeat atomic.Pointer[sealed]  // the last beat signed, for probes (heartbeat.go)
	probing    atomic.Int32            // probes running (probe.go)
	announce   atomic.Int64            // the interval our beats announce, in ns (see announced)
	started    time.Time               // when New started gossip
	probes     *queueProbes            // peers' beats being timed through our queues (queuedelay.go)
	lost       chan peer.ID
	lostOver   atomic.Bool
	notifiee   *network.NotifyBundle
	once       sync.Once
}

type topicHandle struct {
	info topicInfo
	t    *ps.Topic
	sub  *ps.Subscription // nil when only publishing
	done chan struct{}    // closed when the reader of sub returns
}

// New starts gossip on h, signing with b, and joins the broadcast and heartbeat topics and
// the group topic of every configured capability. b must sign with h's identity key: the
// validators of other nodes refuse a document whose sender.peer_id is not the pubsub author.
// Close the Gossip when done; the host stays the caller's.
func New(h host.Host, b *protocol.Builder, opts ...Option) (*Gossip, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if h == nil || b == nil {
		return nil, fmt.Errorf("pubsub: New needs a host and a builder")
	}
	if b.PeerID() != h.ID() {
		return nil, fmt.Errorf("pubsub: the builder signs as %s but the host is %s; build it from the host's key", b.PeerID(), h.ID())
	}
	if cfg.verifier == nil {
		cfg.verifier = &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gossip{
		h: h, b: b, cfg: cfg, ctx: ctx, cancel: cancel,
		log:     cfg.log.With("agent", b.AgentID()),
		replay:  protocol.NewReplayWindow(cfg.replayCap),
		limiter: newLimiter(cfg.peerRate, cfg.peerBurst),
		topics:  make(map[string]*topicHandle),
		live:    NewLiveness(cfg.livenessConfig()),
		subs:    make(map[*Subscription]struct{}),
		status:  protocol.HeartbeatPayload{Status: protocol.StatusAlive, Version: cfg.version},
		lost:    make(chan peer.ID, 1024), greetNow: make(chan struct{}, 1),
		served:  make(map[network.Stream]struct{}),
		started: time.Now(),
		probes:  newQueueProbes(cfg.interval / 4),
	}
	if err := g.start(); err != nil {
		g.Close() // what start began: gossipsub, the topics joined, the handlers
		return nil, err
	}
	return g, nil
}

// start restores the replay window, starts gossipsub, joins the topics, and starts the
// handlers and the loops. New closes g when it fails.
func (g *Gossip) start() error {
	cfg, h := &g.cfg, g.h
	if len(cfg.restore) > 0 {
		dropped := g.replay.Restore(cfg.restore, cfg.clock())
		g.log.Info("replay window restored", "entries", g.replay.Len(), "dropped_over_capacity", dropped)
	}
	var err error
	if g.ps, err = ps.NewGossipSub(g.ctx, newOneSubscriberHost(h), g.routerOptions()...); err != nil {
		return fmt.Errorf("pubsub: start gossipsub: %w", err)
	}
	g.notifiee = &network.NotifyBundle{DisconnectedF: g.disconnected}
	h.Network().Notify(g.notifiee)
	for _, info := range []topicInfo{{name: g.broadcastTopic(), kind: kindBroadcast}, {name: g.heartbeatTopic(), kind: kindHeartbeat}} {
		if _, err := g.topic(info, true); err != nil {
			return err
		}
	}
	for _, cp := range cfg.capabilities {
		if err := g.JoinGroup(cp); err != nil {
			return err
		}
	}
	if err := g.startGreet(); err != nil {
		return err
	}
	for _, c := range []struct {
		topic string
		n     *atomic.Int64
	}{{g.heartbeatTopic(), &g.hbPeers}, {g.broadcastTopic(), &g.bcPeers}} {
		if err := g.startCountPeers(c.topic, c.n); err != nil {
			return err
		}
	}
	h.SetStreamHandler(g.probeProtocol(), g.serveProbe)
	g.wg.Add(2)
	go g.run()
	go g.beatLoop()
	return nil
}

func (g *Gossip) routerOptions() []ps.Option {
	opts := []ps.Option{
		ps.WithGossipSubParams(gossipParams()),
		ps.WithPeerScore(scoreParams(), scoreThresholds()),
		ps.WithPeerScoreInspect(ps.PeerScoreInspectFn(g.inspectScores), g.cfg.inspectEvery),
		// Every document carries its author's IACP signature, which the validators check;
		// a second signature by gossipsub would double the cost of every message at every
		// node. Messages still name their author (From), which must equal sender.peer_id.
		ps.WithMessageSignaturePolicy(ps.StrictNoSign),
		ps.WithMessageIdFn(msgID),
		ps.WithSeenMessagesTTL(seenTTL),
		// A 1 MiB document plus its pubsub envelope (author, seqno, topic).
		ps.WithMaxMessageSize(protocol.MaxGossipBytes + 4<<10),
		ps.WithPeerExchange(true),
		ps.WithFloodPublish(true),
		// Room for a burst of beats from a large fleet before validation drops anything.
		ps.WithValidateQueueSize(1024),
		ps.WithPeerOutboundQueueSize(256),
		ps.WithLogger(slog.New(libraryHandler{g.log.Handler()}).With("component", "gossipsub")),
		ps.WithAppSpecificRpcInspector(g.inspect),
	}
	if len(g.cfg.direct) > 0 {
		opts = append(opts, ps.WithDirectPeers(g.cfg.direct))
	}
	switch {
	case g.cfg.source != nil:
		opts = append(opts, ps.WithDiscovery(sourceDiscovery{prefix: g.cfg.prefix, src: g.cfg.source}))
	case g.cfg.disc != nil:
		opts = append(opts, ps.WithDiscovery(g.cfg.disc))
	}
	return opts
}

// inspect sees every incoming RPC before gossipsub handles it, on its event loop: it drops
// our own messages relayed back to us, then samples a beat to time it through our queues
// (queuedelay.go). It never refuses an RPC.
func (g *Gossip) inspect(from peer.ID, rpc *ps.RPC) error {
	_ = g.dropOwnRelayed(from, rpc)
	if from != g.h.ID() {
		g.probeRPC(rpc.Publish)
	}
	return nil
}

// dropOwnRelayed takes out of an incoming RPC the messages whose author is this node: copies
// of what it published before a restart, which its peers still hold and offer (IHAVE) and
// send when asked (IWANT). gossipsub would count each as an invalid message of the honest
// peer that relayed it ("self originated message") and, at -100 a message, graylist that
// peer within a second of the restart; the restarted node then heard nobody for as long as
// the penalty took to decay. What is left of the RPC is processed as usual. It runs on
// gossipsub's event loop: it only filters a slice.
func (g *Gossip) dropOwnRelayed(from peer.ID, rpc *ps.RPC) error {
	self := g.h.ID()
	if from == self || len(rpc.Publish) == 0 {
		return nil
	}
	kept := rpc.Publish[:0]
	for _, m := range rpc.Publish {
		if peer.ID(m.GetFrom()) != self {
			kept = append(kept, m)
		}
	}
	if dropped := len(rpc.Publish) - len(kept); dropped > 0 {
		g.stats.ownRelayed.Add(uint64(dropped))
	}
	rpc.Publish = kept
	return nil
}

// Close leaves every topic, cancels every subscription, stops gossipsub and waits for every
// goroutine Gossip started. It does not announce anything: call Leave first for a clean
// departure. Close is safe to call twice.
func (g *Gossip) Close() error {
	g.once.Do(func() {
		g.stateMu.Lock()
		g.closed = true
		for s := range g.subs {
			s.cancelLocked()
		}
		g.stateMu.Unlock()
		if g.notifiee != nil {
			g.h.Network().StopNotify(g.notifiee)
		}
		g.stopServing()
		g.topicMu.Lock()
		for _, th := range g.topics {
			if th.sub != nil {
				th.sub.Cancel()
			}
		}
		g.topicMu.Unlock()
		g.cancel()
		g.wg.Wait()
	})
	return nil
}

// topic joins a topic, registers its validator and score parameters, and subscribes when
// asked. The caller must not hold topicMu.
func (g *Gossip) topic(info topicInfo, subscribe bool) (*topicHandle, error) {
	g.topicMu.Lock()
	defer g.topicMu.Unlock()
	if g.ctx.Err() != nil {
		return nil, ErrClosed
	}
	th, ok := g.topics[info.name]
	if !ok {
		if info.kind == kindGroup && len(g.topics) >= maxGroupTopics+2 {
			return nil, fmt.Errorf("pubsub: this node already uses %d group topics, the most it may", maxGroupTopics)
		}
		// Without an author check a validator never waits: it runs inline, on gossipsub's
		// validation workers. An author check may fetch a certificate: each validation then
		// runs on a goroutine of its own (gossipsub bounds them), within AuthorCheckWait.
		vopts := []ps.ValidatorOpt{ps.WithValidatorInline(g.cfg.authorCheck == nil)}
		if g.cfg.authorCheck != nil {
			vopts = append(vopts, ps.WithValidatorTimeout(AuthorCheckWait+time.Second))
		}
		if err := g.ps.RegisterTopicValidator(info.name, g.validator(info), vopts...); err != nil {
			return nil, fmt.Errorf("pubsub: validator for %s: %w", info.name, err)
		}
		t, err := g.ps.Join(info.name)
		if err != nil {
			return nil, fmt.Errorf("pubsub: join %s: %w", info.name, err)
		}
		if err := t.SetScoreParams(topicScoreParams()); err != nil {
			return nil, fmt.Errorf("pubsub: score parameters of %s: %w", info.name, err)
		}
		th = &topicHandle{info: info, t: t}
		g.topics[info.name] = th
	}
	if subscribe && th.sub == nil {
		sub, err := th.t.Subscribe(ps.WithBufferSize(1024))
		if err != nil {
			return nil, fmt.Errorf("pubsub: subscribe to %s: %w", info.name, err)
		}
		th.sub, th.done = sub, make(chan struct{})
		g.wg.Add(1)
		go g.read(th.info, sub, th.done)
	}
	return th, nil
}

// read delivers the messages of one subscription until it is cancelled.
func (g *Gossip) read(info topicInfo, sub *ps.Subscription, done chan struct{}) {
	defer g.wg.Done()
	defer close(done)
	for {
		m, err := sub.Next(g.ctx)
		if err != nil {
			return
		}
		v, ok := m.ValidatorData.(*validated)
		if ok && m.GetFrom() == g.h.ID() {
			g.ownReturned(v.doc.Envelope.MessageID)
		}
		if !ok || m.GetFrom() == g.h.ID() {
			continue // our own publication
		}
		if info.kind == kindHeartbeat {
			g.probeArrived(m.ID)
		}
		g.deliver(info, m.GetFrom(), m.ReceivedFrom, v)
	}
}

// deliver hands a validated message to the subscribers, and a heartbeat to the liveness
// table. relayer is the peer the message came from, its owner in the replay window.
func (g *Gossip) deliver(info topicInfo, author, relayer peer.ID, v *validated) {
	it := &Item{Message: v.doc, Author: author}
	if info.kind != kindHeartbeat && g.cfg.delivered != nil {
		g.cfg.delivered(protocol.ReplayEntry{ID: v.doc.Envelope.MessageID, Expires: v.doc.Expires(), Owner: relayer.String()})
	}
	now := g.cfg.clock()
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	switch info.kind {
	case kindBroadcast:
		it.Kind, it.Event = KindEvent, v.event
	case kindGroup:
		it.Kind, it.Group = KindGroup, v.group
	case kindHeartbeat:
		it.Kind, it.Heartbeat = KindHeartbeat, v.hb
		sent, _ := v.doc.Time()
		trs, _ := g.live.Observe(Heard{AgentID: v.doc.Envelope.Sender.AgentID, PeerID: author, Payload: v.hb,
			Interval: v.interval, Sent: sent, MessageID: v.doc.Envelope.MessageID}, now)
		g.publishLocal(it)
		for _, tr := range trs {
			g.emitLocked(tr)
		}
		g.healthChangedLocked("a suspicion was refuted")
		return
	}
	g.publishLocal(it)
}

// emitLocked logs a transition and offers it to subscribers; the caller holds stateMu.
func (g *Gossip) emitLocked(tr Transition) {
	g.log.Debug("liveness", "peer_agent", tr.AgentID, "from", tr.From, "to", tr.To, "reason", tr.Reason)
	g.publishLocal(&Item{Kind: KindTransition, Transition: tr})
}

// Forget drops agentID from the liveness table when pid speaks for it (a node whose
// certificate was revoked, say) and tells subscribers with a transition to StateGone and
// reason. It reports whether there was such a row. Whether the agent comes back is the
// author check's to decide (WithAuthorCheck): a beat it lets through adds the row again.
func (g *Gossip) Forget(agentID string, pid peer.ID, reason string) bool {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	tr, ok := g.live.Forget(agentID, pid, g.cfg.clock(), reason)
	if ok {
		g.emitLocked(tr)
	}
	return ok
}

// disconnected is the network notifiee callback: it must not block nor lock.
func (g *Gossip) disconnected(_ network.Network, c network.Conn) {
	select {
	case g.lost <- c.RemotePeer():
	default:
		// The queue is full: this disconnect falls back to the heartbeat timeout.
		g.lostOver.Store(true)
	}
}

// run owns the checker ticker and the disconnect queue.
func (g *Gossip) run() {
	defer g.wg.Done()
	var tick <-chan time.Time
	if d := g.cfg.checkInterval(); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-g.ctx.Done():
			return
		case scheduled := <-tick:
			// A ticker's value is the time the tick was due, not when it was received.
			g.ticked("a tick of the liveness checker", scheduled, time.Now())
			g.Check()
			g.probeDue(g.cfg.clock())
		case p := <-g.lost:
			g.peerLost(p)
		}
	}
}

func (g *Gossip) peerLost(p peer.ID) {
	if g.h.Network().Connectedness(p) == network.Connected {
		return // another connection to the peer remains
	}
	g.stateMu.Lock()
	g.live.Disconnected(p)
	g.stateMu.Unlock()
}

// Check applies the silence rules now (suspect, stuck, forgotten) and emits the transitions.
// The run goroutine calls it every check interval; an owner that set WithCheckInterval(-1)
// calls it itself, typically after advancing its clock.
func (g *Gossip) Check() {
	now := g.cfg.clock()
	g.limiter.prune(now)
	if g.lostOver.Swap(false) {
		g.log.Warn("disconnect notifications overflowed; those peers will be suspected by heartbeat timeout")
	}
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	for _, tr := range g.live.Tick(now) {
		g.emitLocked(tr)
	}
}

func (g *Gossip) inspectScores(m map[peer.ID]float64) {
	g.scoreMu.Lock()
	defer g.scoreMu.Unlock()
	g.scores = maps.Clone(m)
}

// PeerScores returns gossipsub's score of every peer it keeps a score for (those seen in the
// last hour), as of the last inspection (every DefaultScoreInspection, or WithScoreInspection).
func (g *Gossip) PeerScores() map[peer.ID]float64 {
	g.scoreMu.Lock()
	defer g.scoreMu.Unlock()
	return maps.Clone(g.scores)
}

// Stats counts the validators' refusals, the liveness table's rows and evictions, our beats.
type Stats struct {
	Rejected uint64 // invalid: the relayer is penalised
	Ignored  uint64 // dropped without penalty (rate when relayed, expiry at the boundary, ...)
	Evicted  uint64 // liveness rows evicted because the table was full (WithMaxAgents)
	// OwnRelayed counts copies of this node's own earlier messages that peers relayed back
	// (after a restart), dropped before gossipsub could blame the relayer.
	OwnRelayed uint64
	Agents     int    // rows in the liveness table (the agents heard, this one aside)
	MeshBeats  uint64 // beats this node published on the heartbeat topic (probes, and beats nobody could hear, aside)
	// MeshInterval is what this node's beats on the heartbeat topic announce: the heartbeat
	// interval up to MeshBudget agents, a multiple of it beyond (docs/scale.md).
	MeshInterval time.Duration
}

// Stats returns the validator and liveness table counters.
func (g *Gossip) Stats() Stats {
	g.stateMu.Lock()
	st := Stats{Evicted: g.live.Evicted(), Agents: g.live.Len()}
	g.stateMu.Unlock()
	st.Rejected, st.Ignored, st.OwnRelayed = g.stats.rejected.Load(), g.stats.ignored.Load(), g.stats.ownRelayed.Load()
	st.MeshBeats, st.MeshInterval = g.stats.beats.Load(), g.announced()
	return st
}

// Agents returns the liveness table (every agent heard from except this one), by agent id.
func (g *Gossip) Agents() []AgentState {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	return g.live.Agents()
}

// Agent returns one row of the liveness table.
func (g *Gossip) Agent(id string) (AgentState, bool) {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	return g.live.Agent(id)
}

// Load returns an agent's announced load, whether it takes work (alive or busy) and whether
// it is known, for discovery to rank candidates.
func (g *Gossip) Load(agentID string) (load float64, alive bool, known bool) {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	return g.live.Load(agentID)
}

// TopicPeers returns how many peers gossipsub knows on the heartbeat topic and on the
// broadcast topic: 0 means what this node publishes there reaches nobody yet. It does not wait
// for gossipsub's event loop, which in a crowded process can be seconds behind: the counts
// follow gossipsub's peer events (countPeers), and lag its loop by the events not read yet.
func (g *Gossip) TopicPeers() (heartbeat, broadcast int) {
	return int(g.hbPeers.Load()), int(g.bcPeers.Load())
}
