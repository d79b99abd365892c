package pubsub

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
)

const meshSize = 20

// TestMesh20 runs the message scenarios on one 20-node mocknet mesh, in order: the mesh forms,
// broadcasts and group messages arrive, forgeries do not and cost their sender its score, and
// no agent is ever falsely suspect. Heartbeats are every 5 s here: every node validates every
// beat, so 20 nodes in one process under -race on a shared 2-core machine cannot afford 1 s.
func TestMesh20(t *testing.T) {
	caps := func(i int) []Option {
		var c []string
		if i%4 == 0 {
			c = append(c, "code.review")
		}
		if i%5 == 1 {
			c = append(c, "translate")
		}
		return []Option{WithCapabilities(c), WithHeartbeatInterval(5 * time.Second)}
	}
	m := newMesh(t, meshSize, caps)
	cols := make([]*collector, meshSize)
	for i, g := range m.nodes {
		cols[i] = collect(t, g, Filter{})
	}
	m.waitFormed(t, 40*time.Second)
	isSuspect := func(it Item) bool { return it.Kind == KindTransition && it.Transition.To == StateSuspect }

	t.Run("broadcast reaches all", func(t *testing.T) {
		sent, err := m.nodes[3].Broadcast(ctxT(t, 10*time.Second), protocol.EventPayload{EventType: "test.hello", Severity: "info"})
		if err != nil {
			t.Fatal(err)
		}
		testsupport.WaitFor(t, 10*time.Second, "the broadcast at every other node", func() bool {
			for i, c := range cols {
				if i != 3 && c.count(withID(sent.Envelope.MessageID)) != 1 {
					return false
				}
			}
			return true
		})
		it := cols[0].snapshot()
		for _, x := range it {
			if x.Kind == KindEvent && x.Message.Envelope.MessageID == sent.Envelope.MessageID &&
				(x.Event.EventType != "test.hello" || x.Author != m.hosts[3].ID()) {
				t.Fatalf("delivered event %+v", x)
			}
		}
	})

	t.Run("group message reaches exactly the members", func(t *testing.T) {
		members := map[int]bool{}
		for i := range meshSize {
			members[i] = i%4 == 0
		}
		var ids []string
		received := func(i int) int {
			n := 0
			for _, id := range ids {
				n += cols[i].count(withID(id))
			}
			return n
		}
		// Members join the group's mesh through discovery; resend until every member has
		// one (bounded), then check that nobody else got any and nobody got one twice.
		deadline := time.Now().Add(20 * time.Second)
		for {
			sent, err := m.nodes[1].SendToGroup(ctxT(t, 10*time.Second), "code.review", protocol.IntentQuery, map[string]any{"q": "who reviews Go?"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, sent.Envelope.MessageID)
			ok := true
			testsupport.WaitFor(t, 3*time.Second, "settle", func() bool {
				ok = true
				for i := range meshSize {
					if members[i] && received(i) == 0 {
						ok = false
					}
				}
				return true
			})
			if ok {
				break
			}
			if time.Now().After(deadline) {
				var missing []string
				for i := range meshSize {
					if members[i] && received(i) == 0 {
						g := m.nodes[i]
						missing = append(missing, fmt.Sprintf("node %d (%d group peers, %d connections)", i,
							len(g.ps.ListPeers(g.GroupTopic("code.review"))), len(m.hosts[i].Network().Peers())))
					}
				}
				t.Fatalf("members never received a group message (%d sent; sender has %d group peers): %s", len(ids),
					len(m.nodes[1].ps.ListPeers(m.nodes[1].GroupTopic("code.review"))), strings.Join(missing, ", "))
			}
			time.Sleep(500 * time.Millisecond)
		}
		for i := range meshSize {
			n := received(i)
			if !members[i] && n != 0 {
				t.Fatalf("node %d without the capability received %d group messages", i, n)
			}
			for _, id := range ids {
				if c := cols[i].count(withID(id)); c > 1 {
					t.Fatalf("node %d received %s %d times", i, id, c)
				}
			}
		}
		for _, it := range cols[0].snapshot() {
			if it.Kind == KindGroup && (it.Group != "code.review" || it.Message.Message.Type != protocol.TypeRequest) {
				t.Fatalf("group item %+v", it)
			}
		}
	})

	t.Run("forgeries reach nobody and cost the forger", func(t *testing.T) {
		// Capture an honest broadcast, to replay it under another pubsub identity.
		honest, err := m.nodes[7].Broadcast(ctxT(t, 5*time.Second), protocol.EventPayload{EventType: "test.captured"})
		if err != nil {
			t.Fatal(err)
		}
		captured := mustJSON(t, honest)
		forgeries := []struct {
			name       string
			neighbours []int
			doc        func(fsk crypto.PrivKey) (id string, data []byte)
		}{
			{"bad signature", []int{5, 6}, func(fsk crypto.PrivKey) (string, []byte) {
				fb, _ := protocol.NewBuilder("test:forger:agent", fsk, nil)
				m, _ := fb.Event(protocol.Broadcast, protocol.IntentNotify, protocol.EventPayload{EventType: "test.real"})
				m.Message.Payload = json.RawMessage(`{"event_type":"test.forged"}`)
				return m.Envelope.MessageID, mustJSON(t, m)
			}},
			{"expired", []int{10, 11}, func(fsk crypto.PrivKey) (string, []byte) {
				old, _ := protocol.NewBuilder("test:forger:agent", fsk, func() time.Time { return time.Now().Add(-2 * time.Hour) })
				m, _ := old.Event(protocol.Broadcast, protocol.IntentNotify, protocol.EventPayload{EventType: "test.stale"})
				return m.Envelope.MessageID, mustJSON(t, m)
			}},
			{"replay by another peer", []int{15, 16}, func(crypto.PrivKey) (string, []byte) {
				return "", captured
			}},
		}
		for k, f := range forgeries {
			forger, fsk := m.mn.AddHost(t, hostPort+meshSize+k)
			if err := m.mn.LinkAll(); err != nil {
				t.Fatal(err)
			}
			for _, j := range f.neighbours {
				if _, err := m.mn.ConnectPeers(forger.ID(), m.hosts[j].ID()); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			raw, err := ps.NewGossipSub(ctx, forger, ps.WithMessageSignaturePolicy(ps.StrictNoSign))
			if err != nil {
				t.Fatal(err)
			}
			topic, err := raw.Join(m.nodes[0].broadcastTopic())
			if err != nil {
				t.Fatal(err)
			}
			testsupport.WaitFor(t, 10*time.Second, f.name+": the forger's neighbours on the topic", func() bool {
				return len(topic.ListPeers()) == len(f.neighbours)
			})
			var before uint64
			for _, j := range f.neighbours {
				before += m.nodes[j].Stats().Rejected
			}
			id, data := f.doc(fsk)
			if err := topic.Publish(ctx, data); err != nil {
				t.Fatal(err)
			}
			testsupport.WaitFor(t, 10*time.Second, f.name+": the forger graylisted by its neighbours", func() bool {
				for _, j := range f.neighbours {
					if s, ok := m.nodes[j].PeerScores()[forger.ID()]; !ok || s > scoreThresholds().GraylistThreshold {
						return false
					}
				}
				return true
			})
			var after uint64
			for _, j := range f.neighbours {
				after += m.nodes[j].Stats().Rejected
			}
			if after-before != uint64(len(f.neighbours)) {
				t.Fatalf("%s: the neighbours rejected %d messages, want %d", f.name, after-before, len(f.neighbours))
			}
			cancel()
			forger.Close()
			if id == "" {
				continue
			}
			for i, c := range cols {
				if c.count(withID(id)) != 0 {
					t.Fatalf("%s: node %d delivered it", f.name, i)
				}
			}
		}
		// A later honest broadcast from a neighbour reaches everyone: the forgeries, which
		// went through the same neighbours earlier, reached no one.
		marker, err := m.nodes[5].Broadcast(ctxT(t, 5*time.Second), protocol.EventPayload{EventType: "test.marker"})
		if err != nil {
			t.Fatal(err)
		}
		testsupport.WaitFor(t, 10*time.Second, "the marker everywhere", func() bool {
			for i, c := range cols {
				if i != 5 && c.count(withID(marker.Envelope.MessageID)) != 1 {
					return false
				}
			}
			return true
		})
		for i, c := range cols {
			if n := c.count(func(it Item) bool {
				return it.Kind == KindEvent && strings.HasPrefix(it.Event.EventType, "test.") &&
					it.Event.EventType != "test.hello" && it.Event.EventType != "test.captured" && it.Event.EventType != "test.marker"
			}); n != 0 {
				t.Fatalf("node %d delivered %d forged events", i, n)
			}
			if n := c.count(withID(honest.Envelope.MessageID)); i != 7 && n != 1 {
				t.Fatalf("node %d delivered the honest broadcast %d times (the replay must not count)", i, n)
			}
		}
	})

	t.Run("no agent is falsely suspect in a steady run", func(t *testing.T) {
		for i, c := range cols {
			if n := c.count(isSuspect); n != 0 {
				for _, it := range c.snapshot() {
					if isSuspect(it) {
						t.Logf("node %d: %+v", i, it.Transition)
					}
				}
				t.Fatalf("node %d saw %d suspect transitions in a steady mesh", i, n)
			}
		}
		for i, g := range m.nodes {
			if got := len(g.Agents()); got != meshSize-1 {
				t.Fatalf("node %d knows %d agents, want %d", i, got, meshSize-1)
			}
		}
	})

}

// TestMeshLiveness runs the liveness scenarios with 1 s heartbeats on a 10-node mesh: no false
// suspect in a steady run, a draining node is seen draining then offline, and a stopped node
// is suspected everywhere.
func TestMeshLiveness(t *testing.T) {
	const n = 10
	// No discovery: the ring and chords connect everyone, and groups are not used here.
	m := newMesh(t, n, func(int) []Option { return []Option{WithDiscovery(nil)} })
	cols := make([]*collector, n)
	for i, g := range m.nodes {
		cols[i] = collect(t, g, Filter{Kinds: []Kind{KindTransition}})
	}
	m.waitFormed(t, 30*time.Second)
	isSuspect := func(it Item) bool { return it.Kind == KindTransition && it.Transition.To == StateSuspect }

	t.Run("steady run for 5 intervals", func(t *testing.T) {
		end := time.Now().Add(5 * time.Second)
		testsupport.WaitFor(t, 10*time.Second, "5 intervals", func() bool { return time.Now().After(end) })
		for i, c := range cols {
			if k := c.count(isSuspect); k != 0 {
				t.Fatalf("node %d saw %d suspect transitions in a steady mesh", i, k)
			}
		}
	})

	t.Run("a closed connection between live nodes is no suspicion", func(t *testing.T) {
		// What a connection manager does every day: the beats go on through other peers.
		if err := m.hosts[0].Network().ClosePeer(m.hosts[1].ID()); err != nil {
			t.Fatal(err)
		}
		end := time.Now().Add(3 * time.Second) // twice the lost-connection deadline
		testsupport.WaitFor(t, 10*time.Second, "3 intervals", func() bool { return time.Now().After(end) })
		for i, c := range cols {
			if k := c.count(isSuspect); k != 0 {
				t.Fatalf("node %d saw %d suspect transitions after the connection 0-1 closed", i, k)
			}
		}
	})

	t.Run("draining node is seen draining then offline", func(t *testing.T) {
		const d = 3
		if err := m.nodes[d].Drain(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		m.waitState(t, d, StateDraining)
		if err := m.nodes[d].Leave(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		m.waitState(t, d, StateOffline)
		m.stop(d)
		for i, c := range cols {
			if i == d {
				continue
			}
			var seq []State
			for _, it := range c.snapshot() {
				if it.Kind == KindTransition && it.Transition.AgentID == m.agents[d] {
					seq = append(seq, it.Transition.To)
				}
			}
			if len(seq) < 2 || seq[len(seq)-2] != StateDraining || seq[len(seq)-1] != StateOffline {
				t.Fatalf("node %d saw %v for the draining agent", i, seq)
			}
		}
	})

	t.Run("stopped node is suspect everywhere", func(t *testing.T) {
		const s = 7
		start := time.Now()
		m.stop(s)
		m.waitState(t, s, StateSuspect)
		t.Logf("node %d suspected at every other node %s after it stopped (goal: 3 intervals = 3s, measured by BenchmarkGossip100)", s, time.Since(start).Round(time.Millisecond))
		for i, g := range m.nodes {
			if h := g.Health(); !m.closed[i] && h.Score > 0 {
				t.Logf("node %d local health: %+v", i, h)
			}
		}
		if a, _ := m.nodes[0].Agent(m.agents[3]); a.State != StateOffline {
			t.Fatalf("the agent that left is %s, want offline", a.State)
		}
	})
}

// waitState waits until every running node sees agent k in state st.
func (m *mesh) waitState(t *testing.T, k int, st State) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var lagging []string
		for i, g := range m.nodes {
			if i == k || m.closed[i] {
				continue
			}
			if a, ok := g.Agent(m.agents[k]); !ok || a.State != st {
				lagging = append(lagging, fmt.Sprintf("node %d sees %s (last beat %s ago; %d heartbeat peers; %+v)",
					i, a.State, time.Since(a.LastSeen).Round(time.Millisecond), len(g.ps.ListPeers(g.heartbeatTopic())), g.Stats()))
			}
		}
		if len(lagging) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s is not %s everywhere after 15s:\n%s", m.agents[k], st, strings.Join(lagging, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustJSON(t *testing.T, m *protocol.Message) []byte {
	t.Helper()
	b, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TopicPeers answers without waiting for gossipsub's event loop, from its peer events: it
// follows peers arriving on the heartbeat and broadcast topics and leaving them.
func TestTopicPeers_FollowsPeersArrivingAndLeaving(t *testing.T) {
	m := newMesh(t, 3, nil) // node 0 is connected to both others
	g := m.nodes[0]
	testsupport.WaitFor(t, 10*time.Second, "both peers on both topics", func() bool {
		hb, bc := g.TopicPeers()
		return hb == 2 && bc == 2
	})
	m.stop(1)
	testsupport.WaitFor(t, 10*time.Second, "the stopped peer to leave both topics", func() bool {
		hb, bc := g.TopicPeers()
		return hb == 1 && bc == 1
	})
}
