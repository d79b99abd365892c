package pubsub

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
)

// beatJitter is the beat loop's source of draws: WithSeed's, else the global one.
func (g *Gossip) beatJitter() *retry.Jitter { return retry.NewJitter(g.cfg.seed, 2) }

// beatLoop ticks every interval until Leave or Close and publishes a beat on the heartbeat
// topic whenever the mesh beat is due (see meshInterval). Probes sign their own beats when
// the last one is stale (ownSealed).
//
// Every beat announces the interval to its next one, and the gap after a beat is at most the
// shortest interval announced by the last SuspectAfter beats (see pacer): a receiver that heard
// one beat and missed the next SuspectAfter-1 still hears one before the silence it allows, and
// does not suspect an agent that only slowed down. A longer interval is therefore taken
// SuspectAfter-1 beats after it is first announced, and a shorter one at once. greet asks for
// a beat at once (greetNow), which the pacer counts like any other; the tick after it beats
// again only if the mesh the node heard by then asks for a shorter interval than the greeting
// announced.
func (g *Gossip) beatLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.interval)
	defer t.Stop()
	var next time.Time // when the next mesh beat is due
	p := newPacer(g.cfg.interval, g.cfg.suspectAfter)
	jitter := g.beatJitter()
	greetDue := false   // greet asked for the greeting (greetNow)
	var paced time.Time // after a greeting: when its pace sets the next beat
	for {
		now := time.Now()
		if !greetDue && !paced.IsZero() && !now.Before(next) {
			// The tick after a greeting, which announced the interval one peer's beat announced
			// (learnPace): the node beats again now only if what it has heard from the mesh
			// since asks for a shorter one; otherwise the greeting's pace stands.
			if g.meshInterval() >= p.announced {
				next = paced
			}
			paced = time.Time{}
		}
		if greetDue || !now.Before(next) {
			greeted := greetDue
			greetDue = false
			want := g.meshInterval()
			g.announce.Store(int64(want))
			reached, err := g.beatAs(g.ctx, false, greeted)
			if err != nil && g.ctx.Err() == nil {
				g.log.Warn("heartbeat not sent", "err", err)
			}
			grew := p.beat(want, reached)
			gap := p.pace
			if grew && !greeted {
				// Agents stretch at about the same time (when their tables fill), so they
				// would keep beating together, in bursts; the first longer gap is drawn
				// at random (shorter than announced, which is safe) to spread them out.
				gap = g.cfg.interval + time.Duration(jitter.Int64N(int64(p.pace-g.cfg.interval)+1))
			}
			next = now.Add(gap - g.cfg.interval/2)
			paced = time.Time{}
			if greeted {
				// A greeting falls between two ticks, and the next tick checks its pace
				// against what the node heard from the mesh by then (above): the interval
				// one peer's beat announced stands unconfirmed for an interval at most.
				// (Until 2026-11-28 the node beat at that tick whatever it heard: every
				// joiner beat twice, each beat reaching every agent.) After a greeting
				// nobody heard, the node beats at that tick.
				if reached {
					paced = next
				}
				next = now
			}
		}
		select {
		case <-g.ctx.Done():
			return
		case scheduled := <-t.C:
			g.ticked("a tick of the beat loop", scheduled, time.Now())
		case <-g.greetNow:
			greetDue = true
		}
	}
}

// pacer chooses, beat by beat, the time to the next beat.
//
// A receiver judges an agent's silence on the last interval it heard announced, a, and
// suspects it after SuspectAfter x a. So that one beat heard is enough, each of the
// SuspectAfter gaps after a beat announcing a must be at most a: the gap after a beat is the
// shortest interval announced by it and the SuspectAfter-1 beats heard before it. A mesh that
// keeps growing then stretches its beats two beats behind the growth (at the defaults);
// waiting instead for the wanted interval to hold still for SuspectAfter beats kept a node at
// the shortest interval for as long as its wanted interval changed from one beat to the next.
//
// A beat published while the heartbeat topic had no peer (a node's first, at start, as a
// rule) was heard by nobody, and nobody holds the node to what it announced: it does not
// count. So a node that joins a mesh whose beats have stretched, and greets it announcing the
// stretched interval (greet), may take that pace at once, not SuspectAfter beats later.
type pacer struct {
	pace      time.Duration   // time to the next beat
	announced time.Duration   // what the last beat announced
	recent    []time.Duration // what the last SuspectAfter-1 beats heard announced, oldest first
	keep      int             // SuspectAfter-1
}

// newPacer returns a pacer that has sent nothing yet, pacing at interval.
func newPacer(interval time.Duration, suspectAfter int) pacer {
	keep := max(suspectAfter-1, 0)
	return pacer{pace: interval, announced: interval, recent: make([]time.Duration, 0, keep), keep: keep}
}

// beat is one beat, announcing want and heard by someone or not; it reports whether the pace
// grew.
func (p *pacer) beat(want time.Duration, heard bool) (grew bool) {
	pace := want
	for _, a := range p.recent {
		pace = min(pace, a)
	}
	if heard && p.keep > 0 {
		if len(p.recent) == p.keep {
			p.recent = append(p.recent[:0], p.recent[1:]...)
		}
		p.recent = append(p.recent, want)
	}
	grew = pace > p.pace
	p.announced, p.pace = want, pace
	return grew
}

// meshInterval is how often this node beats on the heartbeat topic: its interval in a mesh
// of at most MeshBudget agents, and a whole multiple of it in a larger one, so that the topic
// carries about MeshBudget beats per interval however many agents beat there (docs/scale.md).
// The mesh is as large as the liveness table plus this node. A node that joined less than
// that long ago has not heard every agent yet: until then it beats at least as slowly as the
// agents it heard, by the median of their announced intervals. At most MaxMeshInterval.
func (g *Gossip) meshInterval() time.Duration {
	g.stateMu.Lock()
	n := g.live.Len() + 1
	heard := g.live.MedianInterval()
	g.stateMu.Unlock()
	k := (n + g.cfg.meshBudget - 1) / g.cfg.meshBudget
	iv := time.Duration(k) * g.cfg.interval
	if time.Since(g.started) < heard {
		iv = max(iv, heard.Truncate(g.cfg.interval))
	}
	return max(g.cfg.interval, min(iv, MaxMeshInterval))
}

// announced is the interval this node's beats announce (interval_seconds): the mesh interval
// chosen at its last mesh beat, which is when its next mesh beat comes.
func (g *Gossip) announced() time.Duration {
	if d := time.Duration(g.announce.Load()); d > 0 {
		return d
	}
	return g.cfg.interval
}

// greetPoll is how often greet asks gossipsub whether it can send to a peer that joined, and
// greetWait how long it asks: the stream to a new peer is usually up within milliseconds.
const (
	greetPoll = 50 * time.Millisecond
	greetWait = 10 * time.Second
)

// beat publishes one heartbeat with the current status on the heartbeat topic, announcing
// the mesh interval the beat loop chose, and reports whether the topic had a peer to send it
// to (or one of the node's beats was heard before). Once Leave has begun, only Leave's own
// beat (final) goes out. A failure, unless the node or ctx is closing, is a sign of local
// trouble (see Health).
func (g *Gossip) beat(ctx context.Context, final bool) (reached bool, err error) {
	return g.beatAs(ctx, final, false)
}

// beatAs is beat; isGreeting says it is the greeting. While greet prepares one (g.greeting),
// other beats stay local until the node has been heard.
func (g *Gossip) beatAs(ctx context.Context, final, isGreeting bool) (reached bool, err error) {
	g.beatMu.Lock()
	defer g.beatMu.Unlock()
	if g.leaving && !final {
		return false, nil
	}
	m, err := g.sealLocked()
	if err != nil {
		return false, err
	}
	th, err := g.topic(topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}, false)
	if err != nil {
		return false, err
	}
	g.ownBeat.Store(&ownBeat{id: m.Envelope.MessageID, at: time.Now()})
	// Asking gossipsub for the topic's peers waits for its event loop, seconds under load:
	// it is asked only until a beat has been heard. Every beat after that counts as heard,
	// which holds the pacer to what it announced (the safe side).
	reached = g.heard.Load() || ((isGreeting || !g.greeting.Load()) && len(th.t.ListPeers()) > 0)
	var opts []ps.PubOpt
	if !reached && !final {
		// Nobody to send it to, or the greeting is being prepared (learnPace) and comes next:
		// it goes to this node's own subscription only, where its way back still measures
		// local health. Published to the mesh it would be heard first (or wait in gossipsub's
		// message cache and reach the first peers later, by gossip), announcing the interval
		// the node had before it heard the mesh, which the greeting is there to replace.
		opts = append(opts, ps.WithLocalPublication(true))
	}
	if err := g.publish(ctx, th, m, opts...); err != nil {
		if ctx.Err() == nil && g.ctx.Err() == nil {
			g.publishFailed()
		}
		return false, err
	}
	if len(opts) == 0 {
		g.stats.beats.Add(1)
	}
	if reached && g.heard.CompareAndSwap(false, true) {
		g.stopGreet()
	}
	return reached, nil
}

// sealed is this node's last signed heartbeat, what it answers probes with.
type sealed struct {
	raw []byte
	at  time.Time
}

// sealLocked signs a heartbeat with the current status and the announced interval and keeps it
// for probes. The caller holds beatMu.
func (g *Gossip) sealLocked() (*protocol.Message, error) {
	g.stateMu.Lock()
	hb := g.status
	g.stateMu.Unlock()
	wire := heartbeatWire{HeartbeatPayload: hb, IntervalSeconds: g.announced().Seconds()}
	if g.cfg.certificate != nil {
		wire.Certificate = g.cfg.certificate()
	}
	raw, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	m := &protocol.Message{}
	m.Envelope.Recipient = protocol.Recipient{AgentID: protocol.Broadcast, Channel: protocol.ChannelHealth}
	m.Envelope.TTLSeconds = int64(math.Ceil(g.beatTTL().Seconds()))
	m.Message = protocol.Body{Type: protocol.TypeHeartbeat, Intent: protocol.IntentHealth, Payload: raw}
	if err := g.b.Seal(m); err != nil {
		return nil, err
	}
	doc, err := protocol.EncodeJSON(m)
	if err != nil {
		return nil, err
	}
	g.sealedBeat.Store(&sealed{raw: doc, at: time.Now()})
	return m, nil
}

// ownSealed returns this node's last signed heartbeat, signing a new one first when it is
// older than half an interval and Leave has not begun: a probe's answer says what the agent's
// status was at most half an interval ago.
func (g *Gossip) ownSealed() ([]byte, error) {
	age := g.cfg.interval / 2
	if s := g.sealedBeat.Load(); s != nil && time.Since(s.at) < age {
		return s.raw, nil
	}
	g.beatMu.Lock()
	defer g.beatMu.Unlock()
	if s := g.sealedBeat.Load(); s != nil && (g.leaving || time.Since(s.at) < age) {
		return s.raw, nil
	}
	if _, err := g.sealLocked(); err != nil {
		return nil, err
	}
	return g.sealedBeat.Load().raw, nil
}

// beatTTL is the ttl_seconds of our beats: the interval a beat announces, within which the
// next one is due (see pacer), and half a heartbeat interval, the beat loop's tick, by which
// it may come later, so that a beat lives until its successor does; and the clock-drift
// tolerance, so that a receiver whose clock runs ahead still accepts fresh beats. Every node
// keeps a beat's id in its replay window until the beat expires: a beat that lived
// SuspectAfter intervals, as it did until 2026-11-28, kept three ids per agent at every node
// where one does the same work. At most MaxGossipTTL, which only a MaxMeshInterval raised past
// 57 minutes would reach (TestHeartbeatTTLClamped).
func (g *Gossip) beatTTL() time.Duration {
	return min(g.announced()+g.cfg.interval/2+protocol.DefaultMaxClockSkew, MaxGossipTTL)
}

// SetStatus sets what the next heartbeats announce: status alive or busy, load in 0..1 and
// the number of active tasks. After Drain or Leave the status stays draining or offline and
// only load and active tasks change.
func (g *Gossip) SetStatus(status string, load float64, activeTasks int) error {
	if status != protocol.StatusAlive && status != protocol.StatusBusy {
		return fmt.Errorf("pubsub: status %q: set alive or busy here; use Drain and Leave for the others", status)
	}
	if load < 0 || load > 1 || math.IsNaN(load) {
		return fmt.Errorf("pubsub: load %v is outside 0..1", load)
	}
	if activeTasks < 0 {
		return fmt.Errorf("pubsub: active tasks %d is negative", activeTasks)
	}
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	if g.status.Status == protocol.StatusAlive || g.status.Status == protocol.StatusBusy {
		g.status.Status = status
	}
	g.status.Load, g.status.ActiveTasks = load, activeTasks
	return nil
}

// Drain announces at once that this agent is draining: it finishes its work and accepts no
// more. Heartbeats keep saying draining until Leave.
func (g *Gossip) Drain(ctx context.Context) error {
	g.stateMu.Lock()
	if g.status.Status == protocol.StatusOffline {
		g.stateMu.Unlock()
		return nil
	}
	g.status.Status = protocol.StatusDraining
	g.stateMu.Unlock()
	_, err := g.beat(ctx, false)
	return err
}

// Leave announces a clean departure: draining (if Drain was not called), then offline, the
// last heartbeat. It then waits the leave flush (WithLeaveFlush) or until ctx is done, so
// that the beat leaves the outgoing queues before Close resets the streams. Call it before
// Close; calling it twice is harmless.
func (g *Gossip) Leave(ctx context.Context) error {
	g.stateMu.Lock()
	st := g.status.Status
	g.stateMu.Unlock()
	if st == protocol.StatusOffline {
		return nil
	}
	if st != protocol.StatusDraining {
		if err := g.Drain(ctx); err != nil {
			return err
		}
	}
	g.beatMu.Lock()
	g.leaving = true
	g.beatMu.Unlock()
	g.stateMu.Lock()
	g.status.Status = protocol.StatusOffline
	g.stateMu.Unlock()
	if _, err := g.beat(ctx, true); err != nil {
		return err
	}
	t := time.NewTimer(g.cfg.leaveFlush)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-g.ctx.Done():
		return ErrClosed
	}
}
