package pubsub

import (
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// firstSuspicion returns when a collector first saw agent suspect (zero: never).
func firstSuspicion(c *collector, agent string) time.Time {
	for _, it := range c.snapshot() {
		if it.Kind == KindTransition && it.Transition.AgentID == agent && it.Transition.To == StateSuspect {
			return it.Transition.At
		}
	}
	return time.Time{}
}

// The two tiers on a live mesh (docs/scale.md). With a mesh budget of two beats per
// interval, six agents stretch their mesh beats to three intervals, and the rows say so. An
// agent a node watches is probed every interval: when it crashes, the watcher suspects it
// after three intervals, long before a node that only hears its mesh beats (three stretched
// intervals; node 4 has no connection to node 1 whose loss would hint at the crash).
func TestTiers_StretchedMeshBeatsAndProbedWatches(t *testing.T) {
	m := newMesh(t, 6, func(int) []Option { return []Option{WithDiscovery(nil), WithMeshBudget(2)} })
	m.waitFormed(t, 30*time.Second)
	testsupport.WaitFor(t, 20*time.Second, "beats announcing 3 intervals", func() bool {
		a, ok := m.nodes[4].Agent(m.agents[1])
		return ok && a.Interval == 3*time.Second
	})
	if st := m.nodes[1].Stats(); st.MeshInterval != 3*time.Second || st.Agents != 5 || st.MeshBeats == 0 {
		t.Fatalf("node 1's stats: mesh interval %s with %d agents heard, %d beats, want 3s, 5 and some", st.MeshInterval, st.Agents, st.MeshBeats)
	}
	watcher, other, victim := 0, 4, 1
	m.nodes[watcher].Watch(m.agents[victim], m.hosts[victim].ID())
	testsupport.WaitFor(t, 10*time.Second, "a probe answered", func() bool {
		a, _ := m.nodes[watcher].Agent(m.agents[victim])
		return time.Since(a.LastSeen) < 500*time.Millisecond && m.nodes[victim].Watching() == 0
	})
	cw := collect(t, m.nodes[watcher], Filter{Kinds: []Kind{KindTransition}})
	co := collect(t, m.nodes[other], Filter{Kinds: []Kind{KindTransition}})
	stopped := time.Now()
	m.stop(victim)
	testsupport.WaitFor(t, 30*time.Second, "both nodes suspecting the crashed agent", func() bool {
		return !firstSuspicion(cw, m.agents[victim]).IsZero() && !firstSuspicion(co, m.agents[victim]).IsZero()
	})
	w, o := firstSuspicion(cw, m.agents[victim]), firstSuspicion(co, m.agents[victim])
	t.Logf("suspected %s after the crash by its watcher, %s by a node that only hears its mesh beats", w.Sub(stopped).Round(time.Millisecond), o.Sub(stopped).Round(time.Millisecond))

	if !w.Before(o) {
		t.Fatalf("the watcher suspected at %s, the other node at %s: want the watcher first", w.Format(time.StampMilli), o.Format(time.StampMilli))
	}
}

// A node that does not serve the probe protocol stays watched and is judged by its mesh
// beats (every two intervals here): it is not suspected for ignoring probes.
func TestTiers_UnprobeableAgentIsJudgedByItsMeshBeats(t *testing.T) {
	m := newMesh(t, 2, func(int) []Option { return []Option{WithDiscovery(nil), WithMeshBudget(1)} })
	m.waitFormed(t, 30*time.Second)
	m.hosts[1].RemoveStreamHandler(m.nodes[1].probeProtocol())
	m.nodes[0].Watch(m.agents[1], m.hosts[1].ID())
	testsupport.WaitFor(t, 10*time.Second, "the watch marked unprobeable", func() bool {
		m.nodes[0].stateMu.Lock()
		defer m.nodes[0].stateMu.Unlock()
		return m.nodes[0].live.WatchCount() == 1 && !m.nodes[0].live.Watched(m.agents[1], time.Now())
	})
	c := collect(t, m.nodes[0], Filter{Kinds: []Kind{KindTransition}})
	time.Sleep(4 * time.Second) // more than three intervals
	if at := firstSuspicion(c, m.agents[1]); !at.IsZero() {
		t.Fatalf("the unprobeable agent was suspected at %s", at)
	}
}

// A node joining a mesh whose beats have stretched greets it at the mesh's pace: before its
// greeting it asks its first peer for a beat, and announces the interval that beat announced,
// which it then keeps. (It used to greet announcing its base interval, which held it to that
// interval for SuspectAfter beats, each reaching every agent of the mesh.)
func TestTiers_AJoinerGreetsAStretchedMeshAtItsPace(t *testing.T) {
	const stretched = 6 * time.Second // six agents at a mesh budget of one beat a second
	m := newMesh(t, 6, func(int) []Option { return []Option{WithDiscovery(nil), WithMeshBudget(1)} })
	m.waitFormed(t, 30*time.Second)
	testsupport.WaitFor(t, 30*time.Second, "the mesh's beats announcing 6 intervals", func() bool {
		a, ok := m.nodes[4].Agent(m.agents[2])
		return ok && a.Interval == stretched
	})
	h, sk := m.mn.AddHost(t, hostPort+len(m.hosts))
	if _, err := m.mn.LinkPeers(h.ID(), m.hosts[2].ID()); err != nil {
		t.Fatal(err)
	}
	b, err := protocol.NewBuilder("test:joiner:agent", sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	joiner, err := New(h, b, WithHeartbeatInterval(time.Second), WithDiscovery(nil), WithMeshBudget(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { joiner.Close() })
	if _, err := m.mn.ConnectPeers(h.ID(), m.hosts[2].ID()); err != nil {
		t.Fatal(err)
	}
	// Node 4 first hears of the joiner from its greeting, relayed through node 2 (the joiner's
	// probe of node 2 carries a beat signed before it knew the mesh, to node 2 alone).
	deadline := time.Now().Add(30 * time.Second)
	for {
		if a, ok := m.nodes[4].Agent("test:joiner:agent"); ok {
			// 6 s, or 7 s if the joiner heard the other five agents before its greeting
			if a.Interval < stretched {
				t.Fatalf("the joiner greeted the mesh announcing %s, want the mesh's %s", a.Interval, stretched)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 4 never heard the joiner")
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := joiner.Stats()
	if st.MeshInterval < stretched {
		t.Fatalf("the joiner's mesh interval is %s after its greeting, want %s", st.MeshInterval, stretched)
	}
	// What the joiner heard from the mesh since confirms the greeting's pace: it does not beat
	// again at its next tick (a second of its interval), but a pace after the greeting.
	if st.MeshBeats != 1 {
		t.Fatalf("the joiner published %d beats by its greeting, want the greeting alone", st.MeshBeats)
	}
	time.Sleep(3 * time.Second)
	if n := joiner.Stats().MeshBeats; n != 1 {
		t.Fatalf("the joiner published %d beats within 3 s of its greeting at a pace of %s, want the greeting alone", n, stretched)
	}
}
