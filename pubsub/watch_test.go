package pubsub

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// slowBeat is a beat announcing a stretched mesh interval.
func slowBeat(agent string, sent time.Time, every time.Duration) Heard {
	h := beat(agent, "P", "alive", sent)
	h.Interval = every
	return h
}

// An agent beating on the mesh every 10 minutes is suspect after three of its own intervals
// when this node does not watch it, and after three of this node's 30 s intervals when it
// does: a watched agent is probed every interval, so its silence is judged on that.
func TestWatch_WatchedAgentIsJudgedOnTheProbeInterval(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second})
	l.Observe(slowBeat("a:b:far", t0, 10*time.Minute), t0)
	l.Observe(slowBeat("a:b:near", t0, 10*time.Minute), t0)
	l.Watch("a:b:near", "P", t0)
	if trs := l.Tick(t0.Add(89 * time.Second)); len(trs) != 0 {
		t.Fatalf("before three probe intervals: %v", states(trs))
	}
	trs := l.Tick(t0.Add(90 * time.Second))
	if len(trs) != 1 || trs[0].AgentID != "a:b:near" || trs[0].To != StateSuspect {
		t.Fatalf("after three probe intervals: %+v, want only the watched agent suspect", trs)
	}
	if trs := l.Tick(t0.Add(29 * time.Minute)); len(trs) != 0 {
		t.Fatalf("the unwatched agent within three of its intervals: %+v", trs)
	}
	trs = l.Tick(t0.Add(30 * time.Minute))
	if len(trs) != 1 || trs[0].AgentID != "a:b:far" || trs[0].To != StateSuspect {
		t.Fatalf("after three of its own intervals: %+v, want the unwatched agent suspect", trs)
	}
	// Stuck and forgotten wait one beat past the suspicion, and twice that.
	if a, _ := l.Agent("a:b:far"); a.State != StateSuspect {
		t.Fatalf("state %s", a.State)
	}
	if trs := l.Tick(t0.Add(40 * time.Minute)); len(trs) != 2 || trs[0].To != StateStuck {
		t.Fatalf("at 40 min: %+v, want both stuck", trs)
	}
	if trs := l.Tick(t0.Add(80 * time.Minute)); len(trs) != 2 || trs[0].To != StateGone {
		t.Fatalf("at 80 min: %+v, want both forgotten", trs)
	}
}

// A watch does not hold silence from before it began against the agent: a row last heard
// five minutes ago on its slow mesh beat is given three probe intervals from the watch.
func TestWatch_SilenceCountsFromTheWatch(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second})
	l.Observe(slowBeat("a:b:c", t0, 10*time.Minute), t0)
	at := t0.Add(5 * time.Minute)
	l.Watch("a:b:c", "P", at)
	if trs := l.Tick(at.Add(89 * time.Second)); len(trs) != 0 {
		t.Fatalf("within three probe intervals of the watch: %+v", trs)
	}
	if trs := l.Tick(at.Add(90 * time.Second)); len(trs) != 1 || trs[0].To != StateSuspect {
		t.Fatalf("three probe intervals after the watch: %+v", trs)
	}
}

// Due returns the watched agents not heard from nor probed within an interval, at most limit,
// drops lapsed watches, and skips agents that refused the probe protocol.
func TestWatch_DueProbesTheSilentOnly(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second, WatchFor: 10 * time.Minute, MaxWatched: 3})
	for i := range 4 {
		l.Watch(fmt.Sprintf("a:b:%d", i), "P", t0.Add(time.Duration(i)*time.Second))
	}
	if l.WatchCount() != 3 || l.Watched("a:b:0", t0) {
		t.Fatalf("the full set did not drop the watch lapsing first: %d watched, a:b:0 %v", l.WatchCount(), l.Watched("a:b:0", t0))
	}
	if due := l.Due(t0.Add(4*time.Second), 2); len(due) != 2 {
		t.Fatalf("first round: %d due, want 2 (the limit)", len(due))
	}
	if due := l.Due(t0.Add(5*time.Second), 10); len(due) != 1 {
		t.Fatalf("second round: %d due, want the one left", len(due))
	}
	// a:b:1 is heard (a probe answer, a beat); a:b:2 refuses probes
	l.Observe(beat("a:b:1", "P", "alive", t0.Add(20*time.Second)), t0.Add(20*time.Second))
	l.Unprobeable("a:b:2", t0.Add(20*time.Second))
	due := l.Due(t0.Add(40*time.Second), 10)
	if len(due) != 1 || due[0].AgentID != "a:b:3" {
		t.Fatalf("after an interval: %+v, want only a:b:3 (a:b:1 was heard, a:b:2 is judged by its mesh beats)", due)
	}
	if due := l.Due(t0.Add(20*time.Second+refuseFor*30*time.Second), 10); len(due) != 3 {
		t.Fatalf("%d due after a:b:2's refusal expired, want all 3 again", len(due))
	}
	if due := l.Due(t0.Add(11*time.Minute), 10); len(due) != 0 || l.WatchCount() != 0 {
		t.Fatalf("lapsed watches: %+v due, %d watched", due, l.WatchCount())
	}
}

// A stretched mesh beat is announced by SuspectAfter beats at the old pace before it is taken
// (a receiver that missed one still hears it from another), and a shorter one is taken at once.
func TestPacer_AnnouncesALongerIntervalBeforeTakingIt(t *testing.T) {
	const T = 30 * time.Second
	p := newPacer(T, 3)
	var got []string
	for _, want := range []time.Duration{T, 4 * T, 4 * T, 4 * T, 4 * T, 2 * T, 2 * T} {
		grew := p.beat(want, true)
		got = append(got, fmt.Sprintf("%s/%s/%v", p.announced, p.pace, grew))
	}
	wantSeq := "[30s/30s/false 2m0s/30s/false 2m0s/30s/false 2m0s/2m0s/true 2m0s/2m0s/false 1m0s/1m0s/false 1m0s/1m0s/false]"
	if fmt.Sprint(got) != wantSeq {
		t.Fatalf("announced/pace per beat: %v\nwant %s", got, wantSeq)
	}
}

// In a mesh that keeps growing, the interval wanted grows at every beat: the pace follows it
// SuspectAfter-1 beats behind, rather than waiting for it to hold still (which kept every node
// of a mesh growing by a mesh budget a minute at the shortest interval).
func TestPacer_AGrowingMeshStretchesTwoBeatsBehind(t *testing.T) {
	const T = 30 * time.Second
	p := newPacer(T, 3)
	var paces []time.Duration
	for k := 1; k <= 6; k++ {
		p.beat(time.Duration(k)*T, true)
		paces = append(paces, p.pace)
	}
	if want := []time.Duration{T, T, T, 2 * T, 3 * T, 4 * T}; fmt.Sprint(paces) != fmt.Sprint(want) {
		t.Fatalf("paces %v, want %v", paces, want)
	}
}

// A node joining a mesh whose beats have stretched: its first beat, at start, announced the
// base interval to nobody; it greets the mesh announcing the mesh's interval, and takes that
// pace at once (it used to beat three times more at the base interval, each beat reaching
// every agent of the mesh). A greeting heard by its peers holds the node to it as any beat.
func TestPacer_ABeatNobodyHeardPromisesNothing(t *testing.T) {
	const T, M = 30 * time.Second, 8 * 30 * time.Second
	p := newPacer(T, 3)
	p.beat(T, false) // at start, no peer on the topic
	if grew := p.beat(M, true); !grew || p.pace != M {
		t.Fatalf("after a greeting announcing %s: pace %s (grew %v), want %s", M, p.pace, grew, M)
	}
	if p.beat(T, true); p.pace != T {
		t.Fatalf("a shorter interval is taken at once: pace %s", p.pace)
	}
	if p.beat(M, true); p.pace != T {
		t.Fatalf("a longer one waits for the beats that announced %s: pace %s", T, p.pace)
	}
}

// Whatever the intervals wanted, a receiver that heard one beat, announcing a, and missed the
// next SuspectAfter-1 hears the one after them within SuspectAfter x a: it never suspects an
// agent that only changed its pace. That holds with beats that nobody heard (published while
// the topic had no peer) among them: they are not counted, and promise nothing.
func TestPacer_OneBeatHeardIsEnoughToWaitForTheNext(t *testing.T) {
	const T = 30 * time.Second
	for _, suspectAfter := range []int{1, 2, 3, 5} {
		rng := rand.New(rand.NewPCG(uint64(suspectAfter), 7))
		p := newPacer(T, suspectAfter)
		var at, announced []time.Duration // per beat: when, and what it announced
		var heard []bool
		now := time.Duration(0)
		for range 2000 {
			h := rng.IntN(5) > 0
			p.beat(time.Duration(1+rng.IntN(30))*T, h)
			at, announced, heard = append(at, now), append(announced, p.announced), append(heard, h)
			now += p.pace
		}
		for k := range len(at) - suspectAfter {
			if !heard[k] {
				continue
			}
			if silence, allowed := at[k+suspectAfter]-at[k], time.Duration(suspectAfter)*announced[k]; silence > allowed {
				t.Fatalf("suspect_after %d: beat %d announced %s, the beat %d later came %s after it (allowed %s)",
					suspectAfter, k, announced[k], suspectAfter, silence, allowed)
			}
		}
	}
}

// A watched agent whose connection dropped is probed at once, not an interval later: the
// answer confirms it before the lost-connection hint makes it suspect.
func TestWatch_ALostConnectionIsConfirmedByAProbeAtOnce(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	l.Watch("a:b:c", "P", t0)
	if due := l.Due(t0.Add(5*time.Second), 10); len(due) != 0 {
		t.Fatalf("probed 5 s after a beat: %+v", due)
	}
	l.Disconnected("P")
	if due := l.Due(t0.Add(6*time.Second), 10); len(due) != 1 {
		t.Fatalf("after the connection dropped: %d due, want the agent probed at once", len(due))
	}
	if due := l.Due(t0.Add(7*time.Second), 10); len(due) != 0 {
		t.Fatalf("probed again a second later: %+v", due)
	}
}
