package pubsub

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
)

// BenchmarkGossip100 measures, on a 100-node mocknet mesh: broadcast delivery latency (p50,
// p99, max) and delivery ratio, and the time for every other node to suspect a stopped node,
// in heartbeat intervals. Goals: p99 <= 50 ms, 100% delivered, detection p99 <= 3 intervals.
//
// Heartbeats are every 10 s: in one process every node validates every beat (100^2 / interval
// signature checks per second on the machine's cores), which 1 s beats would saturate.
//
//	go test -run XXX -bench Gossip100 -benchtime 1x ./pubsub/
func BenchmarkGossip100(b *testing.B) {
	const n, interval, perIter = 100, 10 * time.Second, 20
	m := newMesh(b, n, func(int) []Option {
		return []Option{WithHeartbeatInterval(interval), WithDiscovery(nil), WithPeerRate(1000, 1000)}
	})
	var mu sync.Mutex
	sentAt := map[string]time.Time{}
	var lat []time.Duration
	subs := make([]*Subscription, n)
	var wg sync.WaitGroup
	for i, g := range m.nodes {
		s, err := g.Subscribe(Filter{Kinds: []Kind{KindEvent}}, 4096)
		if err != nil {
			b.Fatal(err)
		}
		subs[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range s.C() {
				now := time.Now()
				mu.Lock()
				if t0, ok := sentAt[it.Message.Envelope.MessageID]; ok {
					lat = append(lat, now.Sub(t0))
				}
				mu.Unlock()
			}
		}()
	}
	defer func() {
		for _, s := range subs {
			s.Cancel()
		}
		wg.Wait()
	}()
	testsupport.WaitFor(b, 3*time.Minute, "every node to know every other", func() bool {
		for _, g := range m.nodes {
			if len(g.Agents()) < n-1 {
				return false
			}
		}
		return true
	})

	sent := 0
	b.ResetTimer()
	for b.Loop() {
		for k := range perIter {
			src := (sent + k*37) % n
			ev := protocol.EventPayload{EventType: "bench.tick"}
			mu.Lock() // hold the lock so that the id is recorded before any delivery
			msg, err := m.nodes[src].b.Event(protocol.Broadcast, protocol.IntentNotify, ev, protocol.WithChannel(protocol.ChannelNotification))
			if err != nil {
				mu.Unlock()
				b.Fatal(err)
			}
			sentAt[msg.Envelope.MessageID] = time.Now()
			mu.Unlock()
			th, err := m.nodes[src].topic(topicInfo{name: m.nodes[src].broadcastTopic(), kind: kindBroadcast}, false)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.nodes[src].publish(ctxT(b, 10*time.Second), th, msg); err != nil {
				b.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		sent += perIter
	}
	b.StopTimer()
	want := sent * (n - 1)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	l := slices.Clone(lat)
	mu.Unlock()
	slices.Sort(l)
	if len(l) == 0 {
		b.Fatal("nothing delivered")
	}
	pct := func(p float64) float64 {
		return float64(l[min(len(l)-1, int(p*float64(len(l))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(l[len(l)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(100*float64(len(l))/float64(want), "delivered-%")

	// Failure detection: stop 3 nodes at once; time until each other node suspects each.
	stopped := []int{11, 55, 99}
	start := time.Now()
	for _, k := range stopped {
		m.stop(k)
	}
	var detect []float64
	seen := map[[2]int]bool{}
	for deadline := time.Now().Add(6 * interval); time.Now().Before(deadline) && len(seen) < len(stopped)*(n-len(stopped)); {
		for i, g := range m.nodes {
			for _, k := range stopped {
				if m.closed[i] || seen[[2]int{i, k}] {
					continue
				}
				if a, ok := g.Agent(m.agents[k]); ok && a.State == StateSuspect {
					seen[[2]int{i, k}] = true
					detect = append(detect, float64(time.Since(start))/float64(interval))
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	slices.Sort(detect)
	if len(detect) > 0 {
		b.ReportMetric(detect[min(len(detect)-1, int(0.99*float64(len(detect))))], "detect-p99-intervals")
		b.ReportMetric(detect[len(detect)-1], "detect-max-intervals")
	}
	b.ReportMetric(float64(len(detect))/float64(len(stopped)*(n-len(stopped))), "detected-ratio")
}

// BenchmarkMsgID: the gossipsub id of a heartbeat-sized document, computed for every copy
// received.
func BenchmarkMsgID(b *testing.B) {
	m := &pb.Message{Data: make([]byte, 600), From: []byte("12D3KooWGTq933dvxQXwr1xfVnAmQ2KKR2HspxTRTTsf4MN9ywQx")}
	topic := DefaultTopicPrefix + "heartbeat"
	m.Topic = &topic
	b.ReportAllocs()
	for b.Loop() {
		_ = msgID(m)
	}
}

// BenchmarkLivenessTick is one second of a 500-agent table in a mesh past its connection limit
// under load, as in a large join on a saturated machine: a connection is trimmed, a beat
// arrives, and the tick is late or on time (the health multiplier moves), then Tick. Its
// ns/op is what a node spends a second on its table.
func BenchmarkLivenessTick(b *testing.B) {
	const agents = 500
	cfg := LivenessConfig{Interval: 30 * time.Second, SuspectAfter: 3, StuckAfter: 10 * time.Minute,
		ForgetAfter: time.Hour, MaxAgents: agents, ConnHigh: 48}
	l := NewLiveness(cfg)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	peers := make([]peer.ID, agents)
	for i := range peers {
		peers[i] = peer.ID(fmt.Sprintf("peer-%03d", i))
		h := Heard{AgentID: fmt.Sprintf("a:h:%03d", i), PeerID: peers[i], Interval: 4 * time.Minute,
			Sent: now, MessageID: fmt.Sprintf("%08d", i)}
		h.Payload.Status = "alive"
		l.Observe(h, now)
	}
	seq := agents
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Second)
		l.Disconnected(peers[i%agents])
		seq++
		j := (i * 7) % agents
		h := Heard{AgentID: fmt.Sprintf("a:h:%03d", j), PeerID: peers[j], Interval: 4 * time.Minute,
			Sent: now, MessageID: fmt.Sprintf("%08d", seq)}
		h.Payload.Status = "alive"
		l.Observe(h, now)
		late := time.Duration(i%2) * 400 * time.Millisecond
		l.Ticked(now.Add(-late), now)
		l.Tick(now)
	}
}
