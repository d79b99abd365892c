package pubsub

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/peer"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func beat(agent string, pid peer.ID, status string, sent time.Time) Heard {
	return Heard{AgentID: agent, PeerID: pid, Payload: protocol.HeartbeatPayload{Status: status, Load: 0.5, ActiveTasks: 2, Version: "v1"},
		Sent: sent, MessageID: sent.Format(time.RFC3339Nano)}
}

// one returns the only transition Observe made, nil for none; more than one is a failure
// the caller sees as a mismatch (eviction is tested on its own).
func one(trs []Transition, ok bool) (*Transition, bool) {
	switch len(trs) {
	case 0:
		return nil, ok
	case 1:
		return &trs[0], ok
	}
	return &Transition{Reason: "more than one transition"}, ok
}

func states(trs []Transition) []State {
	var out []State
	for _, tr := range trs {
		out = append(out, tr.To)
	}
	return out
}

func TestLivenessSilence(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second})
	tr, ok := one(l.Observe(beat("a:b:c", "P", "alive", t0), t0))
	if !ok || tr == nil || tr.From != "" || tr.To != StateAlive {
		t.Fatalf("first beat: %+v %v", tr, ok)
	}
	// Beats every 30 s keep it alive without transitions.
	for i := 1; i <= 4; i++ {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		if tr, _ := one(l.Observe(beat("a:b:c", "P", "alive", at), at)); tr != nil {
			t.Fatalf("steady beat %d made a transition %+v", i, tr)
		}
		if trs := l.Tick(at.Add(29 * time.Second)); len(trs) != 0 {
			t.Fatalf("tick between beats: %+v", trs)
		}
	}
	last := t0.Add(120 * time.Second)
	if trs := l.Tick(last.Add(89 * time.Second)); len(trs) != 0 {
		t.Fatalf("2.97 missed beats made %v", states(trs))
	}
	if trs := l.Tick(last.Add(90 * time.Second)); len(trs) != 1 || trs[0].To != StateSuspect || trs[0].From != StateAlive {
		t.Fatalf("3 missed beats: %+v", trs)
	}
	if trs := l.Tick(last.Add(91 * time.Second)); len(trs) != 0 {
		t.Fatalf("suspect again: %+v", trs)
	}
	if load, alive, known := l.Load("a:b:c"); alive || !known || load != 0.5 {
		t.Fatalf("Load of a suspect = %v %v %v", load, alive, known)
	}
	if trs := l.Tick(last.Add(600 * time.Second)); len(trs) != 1 || trs[0].To != StateStuck {
		t.Fatalf("600 s of silence: %+v", trs)
	}
	// A beat brings it back.
	back := last.Add(700 * time.Second)
	if tr, _ := one(l.Observe(beat("a:b:c", "P", "busy", back), back)); tr == nil || tr.From != StateStuck || tr.To != StateBusy {
		t.Fatalf("recovery: %+v", tr)
	}
	if _, alive, _ := l.Load("a:b:c"); !alive {
		t.Fatal("busy agent should take work")
	}
	if trs := l.Tick(back.Add(time.Hour)); len(trs) != 1 || trs[0].To != StateGone || l.Len() != 0 {
		t.Fatalf("forget: %+v len %d", trs, l.Len())
	}
	if _, _, known := l.Load("a:b:c"); known {
		t.Fatal("forgotten agent still known")
	}
}

func TestLivenessAnnouncedInterval(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second, SuspectAfter: 2})
	h := beat("a:b:c", "P", "alive", t0)
	h.Interval = time.Second
	l.Observe(h, t0)
	if trs := l.Tick(t0.Add(1999 * time.Millisecond)); len(trs) != 0 {
		t.Fatalf("early: %+v", trs)
	}
	if trs := l.Tick(t0.Add(2 * time.Second)); len(states(trs)) != 1 || trs[0].To != StateSuspect {
		t.Fatalf("2 missed 1 s beats: %+v", trs)
	}
}

func TestLivenessDrainOfflineAndOrder(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	tr, _ := one(l.Observe(beat("a:b:c", "P", "draining", t0.Add(time.Second)), t0.Add(time.Second)))
	if tr == nil || tr.To != StateDraining {
		t.Fatalf("draining: %+v", tr)
	}
	if _, alive, _ := l.Load("a:b:c"); alive {
		t.Fatal("a draining agent must not be offered work")
	}
	// offline sent 1 ms later overtakes a second draining beat sent in between.
	off := t0.Add(time.Second + 2*time.Millisecond)
	if tr, _ := one(l.Observe(beat("a:b:c", "P", "offline", off), off)); tr == nil || tr.To != StateOffline {
		t.Fatalf("offline: %+v", tr)
	}
	late := beat("a:b:c", "P", "draining", t0.Add(time.Second+time.Millisecond))
	if tr, ok := one(l.Observe(late, off.Add(time.Millisecond))); tr != nil || !ok {
		t.Fatalf("an older beat changed the state: %+v", tr)
	}
	if a, _ := l.Agent("a:b:c"); a.State != StateOffline {
		t.Fatalf("state %s, want offline", a.State)
	}
	// Offline stays offline through silence and disconnects, until forgotten.
	if trs := l.Tick(off.Add(20 * time.Minute)); len(trs) != 0 {
		t.Fatalf("offline agent moved on silence: %+v", trs)
	}
	l.Disconnected("P")
	if trs := l.Tick(off.Add(20*time.Minute + time.Second)); len(trs) != 0 {
		t.Fatalf("offline agent moved on disconnect: %+v", trs)
	}
}

// A dropped connection is a hint confirmed by silence: the agents of that peer are suspect
// once their next beat is half an interval late, long before SuspectAfter missed beats.
func TestLivenessDisconnect(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	l.Observe(beat("a:b:one", "P", "alive", t0), t0)
	l.Observe(beat("a:b:two", "P", "busy", t0), t0)
	l.Observe(beat("a:b:three", "Q", "alive", t0), t0)
	interval := DefaultHeartbeatInterval
	l.Disconnected("P")
	if trs := l.Tick(t0.Add(interval * 3 / 2).Add(-time.Millisecond)); len(trs) != 0 {
		t.Fatalf("suspected before the next beat was half an interval late: %+v", trs)
	}
	trs := l.Tick(t0.Add(interval * 3 / 2))
	if len(trs) != 2 || trs[0].AgentID != "a:b:one" || trs[1].AgentID != "a:b:two" ||
		trs[0].To != StateSuspect || trs[0].Reason != "connection lost, no heartbeat since" {
		t.Fatalf("disconnect of P, then silence: %+v", trs)
	}
	if a, _ := l.Agent("a:b:three"); a.State != StateAlive {
		t.Fatalf("Q's agent moved: %s", a.State)
	}
	if got := l.Agents(); len(got) != 3 || got[0].AgentID != "a:b:one" || got[2].AgentID != "a:b:two" {
		t.Fatalf("Agents not sorted: %+v", got)
	}
}

// In a mesh larger than its budget an agent announces a stretched interval, and connection
// managers close healthy connections all the time: a lost connection is no hint about such an
// agent, which is suspect only after SuspectAfter of its announced beats. Watched, the same
// agent is expected every interval and probed, and the hint counts again.
func TestLivenessDisconnect_AStretchedAgentIsJudgedBySilenceAlone(t *testing.T) {
	const interval = 30 * time.Second
	l := NewLiveness(LivenessConfig{Interval: interval})
	for _, h := range []Heard{beat("a:b:mesh", "P", "alive", t0), beat("a:b:watched", "Q", "alive", t0)} {
		h.Interval = 5 * interval
		l.Observe(h, t0)
	}
	l.Watch("a:b:watched", "Q", t0)
	l.Disconnected("P")
	l.Disconnected("Q")
	trs := l.Tick(t0.Add(lostAfter(interval)))
	if len(trs) != 1 || trs[0].AgentID != "a:b:watched" || trs[0].Reason != "connection lost, no heartbeat since" {
		t.Fatalf("1.5 intervals after both connections dropped: %+v, want the watched agent suspect", trs)
	}
	if trs := l.Tick(t0.Add(lostAfter(5 * interval))); len(trs) != 0 {
		t.Fatalf("a stretched agent suspected on its lost connection: %+v", trs)
	}
	if trs := l.Tick(t0.Add(DefaultSuspectAfter*5*interval - time.Second)); len(trs) != 0 {
		t.Fatalf("a stretched agent suspected before %d of its beats were missed: %+v", DefaultSuspectAfter, trs)
	}
	trs = l.Tick(t0.Add(DefaultSuspectAfter * 5 * interval))
	if len(trs) != 1 || trs[0].AgentID != "a:b:mesh" || trs[0].Reason != "missed heartbeats" {
		t.Fatalf("after %d missed beats: %+v, want the stretched agent suspect", DefaultSuspectAfter, trs)
	}
}

// In a mesh no larger than the connection limit nobody trims connections: a lost one is a
// hint about a stretched agent too, suspect once its next beat is half an interval late.
func TestLivenessDisconnect_WithinTheConnectionLimitAStretchedAgentIsHinted(t *testing.T) {
	const interval = 30 * time.Second
	for _, c := range []struct {
		connHigh int
		want     time.Duration
	}{{2, lostAfter(5 * interval)}, {1, DefaultSuspectAfter * 5 * interval}} {
		l := NewLiveness(LivenessConfig{Interval: interval, ConnHigh: c.connHigh})
		h := beat("a:b:mesh", "P", "alive", t0)
		h.Interval = 5 * interval
		l.Observe(h, t0)
		l.Disconnected("P")
		if trs := l.Tick(t0.Add(c.want - time.Second)); len(trs) != 0 {
			t.Fatalf("conn_high %d: suspected %s early: %+v", c.connHigh, time.Second, trs)
		}
		if trs := l.Tick(t0.Add(c.want)); len(trs) != 1 {
			t.Fatalf("conn_high %d: %+v at %s, want the agent suspect", c.connHigh, trs, c.want)
		}
	}
}

// A connection manager closes healthy connections; the agent's beats still arrive through
// other gossip peers, and a beat heard after the loss cancels it.
func TestLivenessDisconnectCancelledByBeat(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	interval := DefaultHeartbeatInterval
	l.Disconnected("P")
	next := t0.Add(interval)
	l.Observe(beat("a:b:c", "P", "alive", next), next)
	// Well past the lost-connection deadline, short of SuspectAfter missed beats.
	if trs := l.Tick(next.Add(2 * interval)); len(trs) != 0 {
		t.Fatalf("a beating agent was suspected after its connection was trimmed: %+v", trs)
	}
	if trs := l.Tick(next.Add(DefaultSuspectAfter * interval)); len(trs) != 1 || trs[0].Reason != "missed heartbeats" {
		t.Fatalf("silence after the beat: %+v", trs)
	}
}

func TestLivenessBinding(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	if _, ok := l.Observe(beat("a:b:c", "EVIL", "offline", t0.Add(time.Second)), t0.Add(time.Second)); ok {
		t.Fatal("another peer declared a live agent offline")
	}
	if a, _ := l.Agent("a:b:c"); a.State != StateAlive || a.PeerID != "P" {
		t.Fatalf("row changed: %+v", a)
	}
	// Once the agent said offline, a new key may take the id over (key rotation).
	l.Observe(beat("a:b:c", "P", "offline", t0.Add(2*time.Second)), t0.Add(2*time.Second))
	if tr, ok := one(l.Observe(beat("a:b:c", "NEW", "alive", t0.Add(3*time.Second)), t0.Add(3*time.Second))); !ok || tr == nil || tr.PeerID != "NEW" {
		t.Fatalf("takeover after offline: %+v %v", tr, ok)
	}
}

// A disconnect concerns the peer that speaks for the agent now: after an agent moved to
// another peer (it went offline and came back elsewhere), losing the old peer says nothing
// about it, and losing the new one does.
func TestLivenessDisconnectFollowsTheAgentsPeer(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	interval := DefaultHeartbeatInterval
	l.Observe(beat("a:b:c", "OLD", "alive", t0), t0)
	l.Observe(beat("a:b:c", "OLD", "offline", t0.Add(time.Second)), t0.Add(time.Second))
	back := t0.Add(2 * time.Second)
	if _, ok := l.Observe(beat("a:b:c", "NEW", "alive", back), back); !ok {
		t.Fatal("the agent could not move to another peer after going offline")
	}
	l.Disconnected("OLD")
	if trs := l.Tick(back.Add(2 * interval)); len(trs) != 0 {
		t.Fatalf("losing the agent's former peer moved it: %+v", trs)
	}
	l.Disconnected("NEW")
	if trs := l.Tick(back.Add(2 * interval)); len(trs) != 1 || trs[0].Reason != "connection lost, no heartbeat since" {
		t.Fatalf("losing the agent's peer, then silence: %+v", trs)
	}
	// Forgotten rows leave the index too.
	l.Tick(back.Add(DefaultForgetAfter + time.Second))
	if len(l.agents) != 0 || len(l.byPeer) != 0 {
		t.Fatalf("after forgetting: %d rows, %d peers indexed", len(l.agents), len(l.byPeer))
	}
}

// A peer may speak for several agents: losing its connection hints every one of them, and an
// agent that leaves the peer (moving to another, or forgotten) leaves the peer's other rows
// indexed.
func TestLivenessDisconnect_HintsEveryAgentOfThePeer(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	for _, id := range []string{"a:b:one", "a:b:two", "a:b:three"} {
		l.Observe(beat(id, "P", "alive", t0), t0)
	}
	hinted := func() (ids []string) {
		for a := l.byPeer["P"]; a != nil; a = a.peerNext {
			if a.lost {
				ids = append(ids, a.AgentID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	// "two" is in the middle of the peer's chain: unlinking it must keep both neighbours.
	l.Observe(beat("a:b:two", "P", "offline", t0.Add(time.Second)), t0.Add(time.Second))
	if _, ok := l.Observe(beat("a:b:two", "Q", "alive", t0.Add(2*time.Second)), t0.Add(2*time.Second)); !ok {
		t.Fatal("two could not move to Q after going offline")
	}
	l.Disconnected("P")
	if got := hinted(); fmt.Sprint(got) != "[a:b:one a:b:three]" {
		t.Fatalf("hinted after P dropped: %v, want one and three (two moved to Q)", got)
	}
	if a, _ := l.Agent("a:b:two"); a.PeerID != "Q" || l.byPeer["Q"] == nil || l.byPeer["Q"].AgentID != "a:b:two" {
		t.Fatalf("two after moving: %+v", a)
	}
	l.Tick(t0.Add(DefaultForgetAfter + time.Minute))
	if len(l.agents) != 0 || len(l.byPeer) != 0 {
		t.Fatalf("after forgetting: %d rows, %d peers indexed", len(l.agents), len(l.byPeer))
	}
}

// Whatever rows come, move and go, the peer index holds exactly the table's rows, each under
// its own peer, its chains linked both ways (a peer claiming many agents must not make
// dropping one a walk down its chain).
func TestLiveness_PeerIndexFollowsTheRows(t *testing.T) {
	const cap = 32
	l := NewLiveness(LivenessConfig{MaxAgents: cap})
	rng := rand.New(rand.NewPCG(3, 5))
	at := t0
	for i := range 5000 {
		at = at.Add(time.Second)
		id, pid := fmt.Sprintf("a:b:agent%d", rng.IntN(3*cap)), peer.ID(fmt.Sprintf("P%d", rng.IntN(4)))
		switch rng.IntN(4) {
		case 0: // leave, so that the next beat may come from another peer
			if a, ok := l.Agent(id); ok {
				l.Observe(beat(id, a.PeerID, "offline", at), at)
			}
		case 1:
			if a, ok := l.Agent(id); ok {
				l.Forget(id, a.PeerID, at, "test")
			}
		default:
			l.Observe(beat(id, pid, "alive", at), at)
		}
		indexed := 0
		for pid, head := range l.byPeer {
			if head == nil || head.peerPrev != nil {
				t.Fatalf("step %d: the chain of %s starts at %+v", i, pid, head)
			}
			for a := head; a != nil; a = a.peerNext {
				if a.PeerID != pid || l.agents[a.AgentID] != a || (a.peerNext != nil && a.peerNext.peerPrev != a) {
					t.Fatalf("step %d: row %s (peer %s) misfiled under %s", i, a.AgentID, a.PeerID, pid)
				}
				indexed++
			}
		}
		if indexed != len(l.agents) {
			t.Fatalf("step %d: %d rows indexed, %d in the table", i, indexed, len(l.agents))
		}
	}
}

// The table is capped: a beat from an unknown agent, when the table is full, evicts the row
// heard from longest ago, with a "gone" transition that says why.
func TestLivenessCapEvictsLongestSilent(t *testing.T) {
	const cap = 16
	l := NewLiveness(LivenessConfig{MaxAgents: cap})
	at := t0
	for i := range cap {
		at = at.Add(time.Second)
		l.Observe(beat(fmt.Sprintf("a:b:agent%d", i), peer.ID(fmt.Sprintf("P%d", i)), "alive", at), at)
	}
	at = at.Add(time.Second)
	l.Observe(beat("a:b:agent0", "P0", "alive", at), at) // agent1 is now the longest silent
	at = at.Add(time.Second)
	trs, ok := l.Observe(beat("a:b:newcomer", "NEW", "alive", at), at)
	if !ok || len(trs) != 2 {
		t.Fatalf("a newcomer to a full table: %+v", trs)
	}
	if gone := trs[0]; gone.AgentID != "a:b:agent1" || gone.To != StateGone || gone.PeerID != "P1" ||
		!strings.Contains(gone.Reason, "table is full") {
		t.Fatalf("evicted %+v, want agent1 gone because the table is full", gone)
	}
	if trs[1].AgentID != "a:b:newcomer" || trs[1].To != StateAlive {
		t.Fatalf("the newcomer: %+v", trs[1])
	}
	if _, known := l.Agent("a:b:agent1"); known || l.Len() != cap || l.Evicted() != 1 {
		t.Fatalf("after eviction: agent1 known %v, %d rows, %d evicted", known, l.Len(), l.Evicted())
	}
	if _, indexed := l.byPeer["P1"]; indexed || len(l.byPeer) != cap {
		t.Fatalf("the peer index kept the evicted row: %d peers", len(l.byPeer))
	}
	// A known agent never evicts anyone.
	at = at.Add(time.Second)
	if trs, _ := l.Observe(beat("a:b:agent2", "P2", "busy", at), at); len(trs) != 1 || l.Evicted() != 1 {
		t.Fatalf("a known agent's beat: %+v, %d evicted", trs, l.Evicted())
	}
}

// An attacker signing beats with thousands of throwaway keys cannot grow the table: it stays
// at its cap, and an agent that keeps beating more often than the table turns over stays in.
func TestLivenessCapUnderThrowawayKeys(t *testing.T) {
	const cap = 16
	l := NewLiveness(LivenessConfig{MaxAgents: cap})
	at := t0
	for i := range 10_000 {
		at = at.Add(time.Millisecond)
		if i%(cap/2) == 0 {
			l.Observe(beat("a:b:honest", "H", "alive", at), at)
		}
		l.Observe(beat(fmt.Sprintf("x:y:throwaway%d", i), peer.ID(fmt.Sprintf("T%d", i)), "alive", at), at)
	}
	if l.Len() != cap || len(l.byPeer) != cap || l.Evicted() != 10_000+1-cap {
		t.Fatalf("%d rows, %d peers indexed, %d evicted", l.Len(), len(l.byPeer), l.Evicted())
	}
	if a, ok := l.Agent("a:b:honest"); !ok || a.State != StateAlive {
		t.Fatalf("the honest agent was evicted: %+v", a)
	}
	n := 0
	for a := l.oldest; a != nil; a = a.newer {
		n++
	}
	if n != cap {
		t.Fatalf("the order of LastSeen holds %d rows, want %d", n, cap)
	}
}

// An agent that said goodbye and started again (same agent id, same peer) is alive at the
// first beat of its new run, even within the same second as its goodbye: timestamps carry
// milliseconds, and two beats of the same millisecond are ordered by their UUIDv7 message ids,
// which a later run draws later.
func TestLivenessRestartAfterGoodbye(t *testing.T) {
	goodbye := t0.Add(500 * time.Millisecond)
	run := func(sent time.Time, status string) Heard {
		h := beat("a:b:c", "P", status, sent)
		h.MessageID = uuid.Must(uuid.NewV7()).String()
		return h
	}
	for _, c := range []struct {
		name  string
		first time.Time
	}{
		{"a later second", goodbye.Add(time.Second)},
		{"the same second", goodbye.Add(time.Millisecond)},
		{"the same millisecond", goodbye},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLiveness(LivenessConfig{})
			l.Observe(run(t0, "alive"), t0)
			late := run(goodbye.Add(-time.Millisecond), "draining") // the old run's, overtaken
			l.Observe(run(goodbye, "offline"), goodbye)
			if tr, _ := one(l.Observe(late, goodbye.Add(time.Millisecond))); tr != nil {
				t.Fatalf("the old run's last draining beat, overtaken by the goodbye: %+v", tr)
			}
			tr, ok := one(l.Observe(run(c.first, "alive"), c.first.Add(time.Millisecond)))
			if !ok || tr == nil || tr.From != StateOffline || tr.To != StateAlive {
				t.Fatalf("the new run's first beat: %+v %v", tr, ok)
			}
		})
	}
}

// Forget drops an agent's row only for the peer that speaks for it, with a transition to gone.
func TestLivenessForget(t *testing.T) {
	l := NewLiveness(LivenessConfig{Interval: 30 * time.Second})
	l.Observe(beat("a:b:c", "P", "alive", t0), t0)
	if _, ok := l.Forget("a:b:c", peer.ID("Q"), t0, "revoked"); ok {
		t.Fatal("another peer's word forgot the agent")
	}
	tr, ok := l.Forget("a:b:c", peer.ID("P"), t0.Add(time.Second), "revoked")
	if !ok || tr.From != StateAlive || tr.To != StateGone || tr.Reason != "revoked" {
		t.Fatalf("forget: %+v %v", tr, ok)
	}
	if _, known := l.Agent("a:b:c"); known || l.Len() != 0 {
		t.Fatal("the row is still there")
	}
	if _, ok := l.Forget("a:b:c", peer.ID("P"), t0, "revoked"); ok {
		t.Fatal("forgot twice")
	}
}
