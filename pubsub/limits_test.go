package pubsub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// Gossip carries messages for at most MaxGossipTTL: a longer ttl_seconds on any gossip topic
// is rejected (its id would sit in every node's replay window for as long).
func TestValidatorRejectsLongTTL(t *testing.T) {
	g := oneNode(t)
	a := newSigner(t, "test:a:agent", nil)
	bc := topicInfo{name: g.broadcastTopic(), kind: kindBroadcast}
	hbt := topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}
	ev := protocol.EventPayload{EventType: "deploy.done"}

	atCap, _ := a.b.Event(protocol.Broadcast, protocol.IntentNotify, ev, protocol.WithTTL(MaxGossipTTL))
	if _, err := g.check(t.Context(), bc, psMsg(t, atCap, bc.name, a.id, a.id)); err != nil {
		t.Fatalf("a broadcast with a TTL of exactly %s: %v", MaxGossipTTL, err)
	}
	over, _ := a.b.Event(protocol.Broadcast, protocol.IntentNotify, ev, protocol.WithTTL(MaxGossipTTL+time.Second))
	if _, err := g.check(t.Context(), bc, psMsg(t, over, bc.name, a.id, a.id)); verdict(err) != "reject" || !strings.Contains(err.Error(), "ttl_seconds 3601") {
		t.Fatalf("a broadcast with a TTL over %s: %s %v", MaxGossipTTL, verdict(err), err)
	}
	hb, _ := a.b.Heartbeat(protocol.HeartbeatPayload{Status: "alive"}, protocol.WithTTL(2*time.Hour))
	if _, err := g.check(t.Context(), hbt, psMsg(t, hb, hbt.name, a.id, a.id)); verdict(err) != "reject" {
		t.Fatalf("a heartbeat with a 2h TTL: %s %v", verdict(err), err)
	}
}

// Broadcast and SendToGroup refuse a TTL over MaxGossipTTL before publishing, and say why.
func TestPublishRefusesLongTTL(t *testing.T) {
	g := oneNode(t)
	ctx := context.Background()
	_, err := g.Broadcast(ctx, protocol.EventPayload{EventType: "deploy.done"}, protocol.WithTTL(2*time.Hour))
	if protocol.CodeOf(err) != protocol.CodePayloadInvalid || !strings.Contains(err.Error(), "at most 1h; send it directly") {
		t.Fatalf("Broadcast with a 2h TTL: %v", err)
	}
	_, err = g.SendToGroup(ctx, "code.review", protocol.IntentQuery, nil, protocol.WithTTL(MaxGossipTTL+time.Second))
	if protocol.CodeOf(err) != protocol.CodePayloadInvalid || !strings.Contains(err.Error(), "at most 1h; send it directly") {
		t.Fatalf("SendToGroup with a TTL over 1h: %v", err)
	}
	if _, err := g.Broadcast(ctx, protocol.EventPayload{EventType: "deploy.done"}, protocol.WithTTL(MaxGossipTTL)); err != nil {
		t.Fatalf("Broadcast with a TTL of exactly %s: %v", MaxGossipTTL, err)
	}
}

// Our own heartbeat's TTL is one announced interval, half a base interval and the clock skew,
// and stays within MaxGossipTTL for the slowest beat there is (100 missed beats of 300 s no
// longer count: a beat lives until its successor, not until its agent is suspect).
func TestHeartbeatTTLClamped(t *testing.T) {
	// A beat lives one announced interval, half a base interval (the beat loop's tick) and
	// the clock skew: the next beat comes within it.
	if ttl := oneNode(t).beatTTL(); ttl != 75*time.Second {
		t.Fatalf("default beat TTL %s, want 30 s + 15 s + 30 s", ttl)
	}
	// The slowest beat there is, announcing MaxMeshInterval, is within MaxGossipTTL, and our
	// own validator takes it.
	g := oneNode(t, WithHeartbeatInterval(MaxHeartbeatInterval), WithSuspectAfter(100),
		WithStuckAfter(101*MaxHeartbeatInterval), WithForgetAfter(101*MaxHeartbeatInterval))
	g.announce.Store(int64(MaxMeshInterval))
	want := MaxMeshInterval + MaxHeartbeatInterval/2 + protocol.DefaultMaxClockSkew
	if ttl := g.beatTTL(); ttl != want || ttl > MaxGossipTTL {
		t.Fatalf("beat TTL %s announcing %s, want %s", ttl, MaxMeshInterval, want)
	}
	if _, err := g.beat(context.Background(), false); err != nil {
		t.Fatalf("our own validator refused our slowest beat: %v", err)
	}
}

// A full table evicts through Gossip too, and Stats counts the evictions.
func TestGossipMaxAgents(t *testing.T) {
	g := oneNode(t, WithMaxAgents(MinMaxAgents))
	hbt := topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}
	gone := collect(t, g, Filter{Kinds: []Kind{KindTransition}})
	for i := range MinMaxAgents + 2 {
		s := newSigner(t, fmt.Sprintf("test:throwaway%d:agent", i), nil)
		m, _ := s.b.Heartbeat(protocol.HeartbeatPayload{Status: "alive"}, protocol.WithTTL(time.Minute))
		v, err := g.check(t.Context(), hbt, psMsg(t, m, hbt.name, s.id, s.id))
		if err != nil {
			t.Fatal(err)
		}
		g.deliver(hbt, s.id, s.id, v)
	}
	if n, st := len(g.Agents()), g.Stats(); n != MinMaxAgents || st.Evicted != 2 {
		t.Fatalf("%d agents, %+v; want %d and 2 evicted", n, st, MinMaxAgents)
	}
	testsupport.WaitFor(t, 5*time.Second, "the two gone transitions", func() bool {
		return gone.count(func(it Item) bool {
			return it.Transition.To == StateGone && strings.Contains(it.Transition.Reason, "table is full")
		}) == 2
	})
}

// Nobody else's beat may take this node's own agent id into its table: our own validator
// would then refuse our own beats as "bound to another peer".
func TestValidatorIgnoresOurAgentIDFromAnotherPeer(t *testing.T) {
	g := oneNode(t)
	hbt := topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}
	squatter := newSigner(t, g.b.AgentID(), nil)
	m, _ := squatter.b.Heartbeat(protocol.HeartbeatPayload{Status: "alive"}, protocol.WithTTL(time.Minute))
	if _, err := g.check(t.Context(), hbt, psMsg(t, m, hbt.name, squatter.id, squatter.id)); verdict(err) != "ignore" ||
		!strings.Contains(err.Error(), "this node's own") {
		t.Fatalf("a beat for our agent id from another peer: %s %v", verdict(err), err)
	}
	if _, err := g.beat(context.Background(), false); err != nil {
		t.Fatalf("our own beat: %v", err)
	}
}

// A node whose direct messages live longer than gossip carries (default_ttl 2h) still
// broadcasts: a gossip message without a TTL of its own gets the builder's, at most
// MaxGossipTTL.
func TestPublishClampsTheBuildersDefaultTTL(t *testing.T) {
	g := oneNodeBuilt(t, func(b *protocol.Builder) *protocol.Builder { return b.WithDefaultTTL(2 * time.Hour) })
	m, err := g.Broadcast(context.Background(), protocol.EventPayload{EventType: "deploy.done"})
	if err != nil {
		t.Fatalf("a broadcast from a builder with a 2h default TTL: %v", err)
	}
	if m.Envelope.TTLSeconds != int64(MaxGossipTTL/time.Second) {
		t.Fatalf("ttl_seconds %d, want %d", m.Envelope.TTLSeconds, int64(MaxGossipTTL/time.Second))
	}
}
