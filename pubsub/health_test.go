package pubsub

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"golang.org/x/time/rate"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// lateTicks reports n ticks of a 250 ms timer, each `late` after it was due, from `from`.
func lateTicks(l *Liveness, from time.Time, n int, late time.Duration) time.Time {
	for range n {
		from = from.Add(250 * time.Millisecond)
		l.Ticked(from, from.Add(late))
	}
	return from
}

// Lifeguard: a tick of the node's own timers that runs late is a sign that the node itself
// is slow; each raises the score by one, up to the maximum; ticks on time lower it by one per
// healthDecayTicks in a row.
func TestLocalHealthScore(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: time.Second, LateTick: 100 * time.Millisecond})
	if h := l.Health(); h.Score != 0 || h.Multiplier != 1 || h.MaxScore != DefaultMaxHealthScore {
		t.Fatalf("a new table: %+v", h)
	}
	at := lateTicks(l, t0, 3, 100*time.Millisecond) // exactly LateTick is on time
	if h := l.Health(); h.Score != 0 || h.OnTimeTicks != 3 || h.LateTicks != 0 {
		t.Fatalf("ticks 100 ms late with a 100 ms threshold: %+v", h)
	}
	at = lateTicks(l, at, 2, 101*time.Millisecond)
	if h := l.Health(); h.Score != 2 || h.Multiplier != 3 || h.LateTicks != 2 || h.WorstLateness != 101*time.Millisecond {
		t.Fatalf("two late ticks: %+v", h)
	}
	at = lateTicks(l, at, healthDecayTicks-1, 0)
	at = lateTicks(l, at, 1, time.Second) // a late tick starts the count of on-time ticks again
	at = lateTicks(l, at, healthDecayTicks-1, 0)
	if h := l.Health(); h.Score != 3 {
		t.Fatalf("no %d on-time ticks in a row yet: score %d, want 3", healthDecayTicks, h.Score)
	}
	at = lateTicks(l, at, 1, 0)
	if h := l.Health(); h.Score != 2 {
		t.Fatalf("after %d on-time ticks in a row: score %d, want 2", healthDecayTicks, h.Score)
	}
	at = lateTicks(l, at, 20, time.Second)
	if h := l.Health(); h.Score != DefaultMaxHealthScore || h.Multiplier != DefaultMaxHealthScore+1 || h.WorstLateness != time.Second {
		t.Fatalf("the score saturates: %+v", h)
	}
	at = lateTicks(l, at, DefaultMaxHealthScore*healthDecayTicks-1, 0)
	if h := l.Health(); h.Score != 1 {
		t.Fatalf("one on-time tick short of %d: %+v", DefaultMaxHealthScore*healthDecayTicks, h)
	}
	at = lateTicks(l, at, 1, 0)
	if h := l.Health(); h.Score != 0 || h.WorstLateness != time.Second {
		t.Fatalf("a full score decays in %d on-time ticks, and the worst lateness is still the recent 1s: %+v",
			DefaultMaxHealthScore*healthDecayTicks, h)
	}
	lateTicks(l, at, 2*healthWindow, 0)
	if h := l.Health(); h.WorstLateness != 0 {
		t.Fatalf("worst lateness %s after %d ticks on time, want 0: it covers the last 32 to 64 ticks", h.WorstLateness, 2*healthWindow)
	}
}

func TestLocalHealthOff(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: time.Second, MaxHealthScore: -1})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	lateTicks(l, t0, 10, time.Second)
	l.PublishFailed()
	if h := l.Health(); h.Score != 0 || h.MaxScore != 0 || h.LateTicks != 10 || h.PublishFailures != 1 {
		t.Fatalf("local health off still counts the signs, and only counts them: %+v", h)
	}
	if trs := l.Tick(t0.Add(3 * time.Second)); len(trs) != 1 || trs[0].To != StateSuspect {
		t.Fatalf("3 missed beats with local health off: %+v", trs)
	}
}

// The effect: while the score is above zero, the silence after which an agent is suspect is
// multiplied by score+1. With a high score an agent 3 beats late is not yet suspect; at score
// 0 it is.
func TestLocalHealthScalesSuspicion(t *testing.T) {
	healthy := NewLiveness(LivenessConfig{Interval: time.Second})
	starved := NewLiveness(LivenessConfig{Interval: time.Second})
	for _, l := range []*Liveness{healthy, starved} {
		l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	}
	lateTicks(starved, t0, 4, 300*time.Millisecond)
	if h := starved.Health(); h.Score != 4 || h.Multiplier != 5 {
		t.Fatalf("after 4 late ticks: %+v", h)
	}
	threeBeatsLate := t0.Add(3 * time.Second)
	if trs := healthy.Tick(threeBeatsLate); len(trs) != 1 || trs[0].To != StateSuspect || trs[0].Reason != "missed heartbeats" {
		t.Fatalf("score 0, 3 beats late: %+v", trs)
	}
	if trs := starved.Tick(threeBeatsLate); len(trs) != 0 {
		t.Fatalf("score 4, 3 beats late: %+v", trs)
	}
	if trs := starved.Tick(t0.Add(15*time.Second - time.Millisecond)); len(trs) != 0 {
		t.Fatalf("score 4, just short of 5 x 3 beats: %+v", trs)
	}
	trs := starved.Tick(t0.Add(15 * time.Second))
	if len(trs) != 1 || trs[0].To != StateSuspect || !strings.Contains(trs[0].Reason, "waited 5x") {
		t.Fatalf("score 4, 5 x 3 beats late: %+v", trs)
	}
}

// The lost-connection rule (1.5 intervals) is scaled too.
func TestLocalHealthScalesLostConnection(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: time.Second})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	l.Disconnected("P")
	lateTicks(l, t0, 1, time.Second) // score 1: x2
	if trs := l.Tick(t0.Add(2999 * time.Millisecond)); len(trs) != 0 {
		t.Fatalf("before 2 x 1.5 intervals: %+v", trs)
	}
	if trs := l.Tick(t0.Add(3 * time.Second)); len(trs) != 1 || !strings.HasPrefix(trs[0].Reason, "connection lost") {
		t.Fatalf("at 2 x 1.5 intervals: %+v", trs)
	}
}

// Stuck and forget keep their absolute times: a node in trouble waits longer to suspect,
// never longer to declare stuck.
func TestLocalHealthLeavesStuckAlone(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	lateTicks(l, t0, DefaultMaxHealthScore, time.Second) // x9: suspect only after 810 s
	if trs := l.Tick(t0.Add(DefaultStuckAfter - time.Second)); len(trs) != 0 {
		t.Fatalf("before the stuck timeout: %+v", trs)
	}
	if trs := l.Tick(t0.Add(DefaultStuckAfter)); len(trs) != 1 || trs[0].From != StateAlive || trs[0].To != StateStuck {
		t.Fatalf("at the stuck timeout with score 8: %+v", trs)
	}
}

// A suspicion is refuted when the agent beats again with a beat sent before this node
// suspected it, or within RefuteGrace after: this node, not the agent, was late.
func TestLocalHealthRefutedSuspicion(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: time.Second, RefuteGrace: 250 * time.Millisecond})
	l.Observe(beat("a:b:refuted", "P", "alive", t0), t0)
	l.Observe(beat("a:b:late", "Q", "alive", t0), t0)
	l.Observe(beat("a:b:grace", "R", "alive", t0), t0)
	suspected := t0.Add(3 * time.Second)
	if trs := l.Tick(suspected); len(trs) != 3 {
		t.Fatalf("all three suspect: %+v", trs)
	}
	// Sent a second before the suspicion, received just after it.
	tr, _ := one(l.Observe(beat("a:b:refuted", "P", "alive", suspected.Add(-time.Second)), suspected.Add(time.Millisecond)))
	if tr == nil || tr.To != StateAlive || !strings.Contains(tr.Reason, "this node was late") {
		t.Fatalf("refuting beat: %+v", tr)
	}
	if h := l.Health(); h.Refuted != 1 || h.Score != 0 {
		t.Fatalf("after a refuted suspicion: %+v (counted; the score moves on local signs only)", h)
	}
	// Sent within the grace after it: our clocks differ by that much, or we were late.
	tr, _ = one(l.Observe(beat("a:b:grace", "R", "alive", suspected.Add(249*time.Millisecond)), suspected.Add(300*time.Millisecond)))
	if tr == nil || tr.To != StateAlive || !strings.Contains(tr.Reason, "249ms after the suspicion, within the refute grace") {
		t.Fatalf("a beat within the grace: %+v", tr)
	}
	if h := l.Health(); h.Refuted != 2 || h.Score != 0 {
		t.Fatalf("after two refuted suspicions: %+v", h)
	}
	// Sent at the end of the grace or later: the agent was late, not us.
	tr, _ = one(l.Observe(beat("a:b:late", "Q", "alive", suspected.Add(250*time.Millisecond)), suspected.Add(300*time.Millisecond)))
	if tr == nil || tr.To != StateAlive || tr.Reason != "heartbeat" {
		t.Fatalf("a late agent's beat: %+v", tr)
	}
	if h := l.Health(); h.Refuted != 2 || h.Score != 0 {
		t.Fatalf("a late agent refuted nothing: %+v", h)
	}
}

func TestLocalHealthPublishFailed(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	l.PublishFailed()
	l.PublishFailed()
	if h := l.Health(); h.PublishFailures != 2 || h.Score != 2 {
		t.Fatalf("two failed publications: %+v", h)
	}
}

// Gossip feeds the signs through the same paths as its loops: ticked with a tick's due and
// actual times (the run and beat loops pass the ticker's value and time.Now), the delivery of
// a refuting heartbeat, a beat that fails to publish. Check scales suspicion by the score.
func TestGossipLocalHealth(t *testing.T) {
	var mu sync.Mutex
	now := time.Now() // near the real clock, which the node's own beats carry
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// The default 30 s beat, so that the beat loop does not tick during the test.
	g := oneNode(t, WithClock(clock))
	// The node's first beat, signed on the real clock, is checked on the test's: wait for it
	// before the test's clock moves, or it is found expired and counted as a failed
	// publication (1 run in 10 under -race, when the beat loop started late).
	testsupport.WaitFor(t, 10*time.Second, "the node's first beat", func() bool { return g.replay.Len() == 1 })
	if h := g.Health(); h.LateAfter != 250*time.Millisecond || h.MaxScore != DefaultMaxHealthScore {
		t.Fatalf("health at the default beat: %+v", h)
	}
	a := newSigner(t, "test:a:agent", clock)
	hbt := topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}
	feed := func(m *protocol.Message) {
		t.Helper()
		v, err := g.check(t.Context(), hbt, psMsg(t, m, hbt.name, a.id, a.id))
		if err != nil {
			t.Fatal(err)
		}
		g.deliver(hbt, a.id, a.id, v)
	}
	first, _ := a.b.Heartbeat(protocol.HeartbeatPayload{Status: "alive"}, protocol.WithTTL(2*time.Minute))
	feed(first)

	due := clock()
	for range 4 {
		due = due.Add(time.Second)
		g.ticked("a test tick", due, due.Add(time.Second))
	}
	if h := g.Health(); h.Score != 4 || h.LateTicks != 4 || h.WorstLateness != time.Second {
		t.Fatalf("after 4 ticks 1 s late: %+v", h)
	}
	advance(60 * time.Second)
	refuting, _ := a.b.Heartbeat(protocol.HeartbeatPayload{Status: "alive"}, protocol.WithTTL(2*time.Minute))
	advance(30 * time.Second)
	g.Check()
	if st, _ := g.Agent("test:a:agent"); st.State != StateAlive {
		t.Fatalf("3 beats late with score 4: %s", st.State)
	}
	for range 4 * healthDecayTicks {
		due = due.Add(time.Second)
		g.ticked("a test tick", due, due)
	}
	g.Check()
	if st, _ := g.Agent("test:a:agent"); st.State != StateSuspect || g.Health().Score != 0 {
		t.Fatalf("3 beats late with score 0: %s, %+v", st.State, g.Health())
	}
	// The beat sent 30 s before the suspicion arrives now.
	feed(refuting)
	if st, _ := g.Agent("test:a:agent"); st.State != StateAlive {
		t.Fatalf("after the refuting beat: %s", st.State)
	}
	if h := g.Health(); h.Refuted != 1 || h.Score != 0 {
		t.Fatalf("after a refuted suspicion: %+v (counted, not a sign: its timestamp is the agent's)", h)
	}
}

func TestGossipPublishFailureRaisesHealth(t *testing.T) {
	// Our own rate refuses a second beat (one token, refilled every 1000 s).
	g := oneNode(t, WithPeerRate(rate.Limit(0.001), 1))
	testsupport.WaitFor(t, 10*time.Second, "the first beat", func() bool { return g.replay.Len() == 1 })
	if h := g.Health(); h.PublishFailures != 0 || h.Score != 0 {
		t.Fatalf("after the first beat: %+v", h)
	}
	if _, err := g.beat(context.Background(), false); err == nil {
		t.Fatal("a beat over our own rate was published")
	}
	if h := g.Health(); h.PublishFailures != 1 || h.Score != 1 {
		t.Fatalf("after a failed beat: %+v", h)
	}
}

// A beat counts as heard (in the pacing) when the heartbeat topic had a peer, which is asked
// of gossipsub until one of the node's beats was heard; after that every beat counts, even
// with no peer left, without asking: the question waits for gossipsub's event loop, which a
// saturated join holds up for seconds, and counting a beat holds the pacer to it (safe).
func TestBeatsCountAsHeardOnceOneWas(t *testing.T) {
	g := oneNode(t, WithHeartbeatInterval(5*time.Minute))
	if reached, err := g.beat(context.Background(), false); err != nil || reached {
		t.Fatalf("a beat with no peer on the topic: reached %v, err %v; want not reached", reached, err)
	}
	g.heard.Store(true)
	if reached, err := g.beat(context.Background(), false); err != nil || !reached {
		t.Fatalf("a beat after one was heard: reached %v, err %v; want reached", reached, err)
	}
}

// The way of the node's own beat through its own gossipsub (publish to its own subscription)
// is a sign of local health: when that queue is seconds long the node hears everyone late,
// even with its timers on time. No peer can make this sign fire.
func TestGossipOwnBeatComingBackLateRaisesHealth(t *testing.T) {
	g := oneNode(t)
	before := g.Health()
	g.ownBeat.Store(&ownBeat{id: "01a2088c-0df4-7dd4-9a29-9df64e71d5a9", at: time.Now().Add(-2 * time.Second)})
	g.ownReturned("someone-else's id")
	if g.Health().SlowQueues != before.SlowQueues {
		t.Fatal("a beat that is not our last one was timed")
	}
	g.ownReturned("01a2088c-0df4-7dd4-9a29-9df64e71d5a9")
	if h := g.Health(); h.SlowQueues != before.SlowQueues+1 || h.Score != before.Score+1 {
		t.Fatalf("our beat came back 2 s late: %+v", h)
	}
	g.ownReturned("01a2088c-0df4-7dd4-9a29-9df64e71d5a9") // counted once
	if h := g.Health(); h.SlowQueues != before.SlowQueues+1 {
		t.Fatalf("one beat counted twice: %+v", h)
	}
	// On time, it is no sign either way: the timers' ticks set the pace of the decay.
	score := g.Health().Score
	g.ownBeat.Store(&ownBeat{id: "01a2088c-0df4-7dd4-9a29-9df64e71d5aa", at: time.Now()})
	g.ownReturned("01a2088c-0df4-7dd4-9a29-9df64e71d5aa")
	if h := g.Health(); h.Score != score || h.OnTimeTicks != before.OnTimeTicks {
		t.Fatalf("a beat back on time moved the score: %+v", h)
	}
}

// Peers' beats are sampled as their RPC reaches gossipsub and timed to our subscription: a
// beat that waited longer than the lateness threshold in our queues raises the score.
func TestGossipPeersBeatsAreTimedThroughOurQueues(t *testing.T) {
	m := newMesh(t, 2, nil)
	g := m.nodes[0]
	timed := func() uint64 {
		g.probes.mu.Lock()
		defer g.probes.mu.Unlock()
		return g.probes.timed
	}
	testsupport.WaitFor(t, 15*time.Second, "a peer's beat timed through our queues", func() bool { return timed() >= 2 })

	before := g.Health()
	g.probes.mu.Lock()
	g.probes.at["a sampled beat"] = time.Now().Add(-3 * time.Second)
	g.probes.mu.Unlock()
	g.probeArrived("a sampled beat")
	if h := g.Health(); h.SlowQueues != before.SlowQueues+1 || h.Score < 1 {
		t.Fatalf("a beat 3 s in our queues: %+v", h)
	}
	g.probeArrived("a sampled beat") // timed once
	if h := g.Health(); h.SlowQueues != before.SlowQueues+1 {
		t.Fatalf("one beat timed twice: %+v", h)
	}
}

// The sample is bounded: one per period, at most maxQueueProbes waiting, the stale ones (most
// are copies gossip had already delivered) dropped to make room.
func TestQueueProbesAreBounded(t *testing.T) {
	const every = 100 * time.Millisecond
	q := newQueueProbes(every)
	t0 := time.Now()
	beat := func(i int) *pb.Message {
		topic := "beats"
		return &pb.Message{Topic: &topic, From: []byte("author"), Data: []byte(fmt.Sprint(i))}
	}
	q.sample(beat(0), t0)
	q.sample(beat(1), t0.Add(every/2)) // within the period: not sampled
	if len(q.at) != 1 {
		t.Fatalf("%d samples within one period, want 1", len(q.at))
	}
	for i := 1; i < maxQueueProbes; i++ {
		q.sample(beat(i), t0.Add(time.Duration(i)*every))
	}
	full := t0.Add(maxQueueProbes * every)
	q.sample(beat(1000), full)
	if _, ok := q.at[msgID(beat(1000))]; ok || len(q.at) != maxQueueProbes {
		t.Fatalf("a sample was taken past the bound: %d held", len(q.at))
	}
	later := t0.Add(queueProbeStale + 3*every) // the first three samples are stale
	q.sample(beat(1001), later)
	if _, ok := q.at[msgID(beat(1001))]; !ok || len(q.at) != maxQueueProbes-2 {
		t.Fatalf("stale samples did not make room: %d held", len(q.at))
	}
	if d, ok := q.arrived(msgID(beat(1001)), later.Add(time.Second)); !ok || d != time.Second {
		t.Fatalf("arrived: %v %v", d, ok)
	}
	if _, ok := q.arrived(msgID(beat(1001)), later.Add(time.Second)); ok {
		t.Fatal("one sample timed twice")
	}
}
