package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// oneNode is a Gossip alone on a mocknet, to drive its validator directly.
func oneNode(t testing.TB, opts ...Option) *Gossip {
	t.Helper()
	return oneNodeBuilt(t, func(b *protocol.Builder) *protocol.Builder { return b }, opts...)
}

// oneNodeBuilt is oneNode with its builder adjusted before the node starts,
// so nothing running reads the builder while a test changes it.
func oneNodeBuilt(t testing.TB, adjust func(*protocol.Builder) *protocol.Builder, opts ...Option) *Gossip {
	t.Helper()
	mn := testsupport.Mocknet(t, 1, testsupport.FirstPort(hostPort))
	h, sk := mn.Hosts[0], mn.Keys[0]
	b, err := protocol.NewBuilder("test:solo:agent", sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(h, adjust(b), append([]Option{WithCheckInterval(-1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

type signer struct {
	b  *protocol.Builder
	id peer.ID
}

func newSigner(t testing.TB, agent string, now func() time.Time) signer {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.NewBuilder(agent, sk, now)
	if err != nil {
		t.Fatal(err)
	}
	return signer{b, b.PeerID()}
}

func psMsg(t testing.TB, m *protocol.Message, topic string, author, relayer peer.ID) *ps.Message {
	t.Helper()
	data, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return &ps.Message{Message: &pb.Message{Data: data, From: []byte(author), Topic: &topic}, ReceivedFrom: relayer}
}

func verdict(err error) string {
	var ev *errVerdict
	switch {
	case err == nil:
		return "accept"
	case errors.As(err, &ev) && ev.ignore:
		return "ignore"
	}
	return "reject"
}

func TestValidator(t *testing.T) {
	g := oneNode(t)
	bc := topicInfo{name: g.broadcastTopic(), kind: kindBroadcast}
	hbt := topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}
	grp := topicInfo{name: g.GroupTopic("code.review"), kind: kindGroup, group: "code.review"}
	a := newSigner(t, "test:a:agent", nil)
	relay := newSigner(t, "test:r:agent", nil).id
	ev := protocol.EventPayload{EventType: "deploy.done"}

	good, _ := a.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
	if v, err := g.check(t.Context(), bc, psMsg(t, good, bc.name, a.id, relay)); err != nil || v.event.EventType != "deploy.done" {
		t.Fatalf("valid event: %v", err)
	}
	cases := []struct {
		name, want, why string
		info            topicInfo
		msg             func() *ps.Message
	}{
		{"replay under its author's name", "ignore", "duplicate", bc, func() *ps.Message { return psMsg(t, good, bc.name, a.id, a.id) }},
		{"replay by a relayer", "ignore", "duplicate", bc, func() *ps.Message { return psMsg(t, good, bc.name, a.id, relay) }},
		{"replay under the replayer's name", "reject", "not the pubsub author", bc, func() *ps.Message { return psMsg(t, good, bc.name, relay, relay) }},
		{"re-encoded replay", "ignore", "duplicate", bc, func() *ps.Message {
			m := psMsg(t, good, bc.name, a.id, a.id)
			m.Data = append([]byte(" "), m.Data...) // other bytes, so another gossipsub id
			return m
		}},
		{"bad signature", "reject", "signature", bc, func() *ps.Message {
			m, _ := a.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
			m.Message.Payload = json.RawMessage(`{"event_type":"forged"}`)
			return psMsg(t, m, bc.name, a.id, relay)
		}},
		{"peer_id is not the author", "reject", "not the pubsub author", bc, func() *ps.Message {
			m, _ := a.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
			return psMsg(t, m, bc.name, relay, relay)
		}},
		{"heartbeat on the broadcast topic", "reject", "broadcast topic", bc, func() *ps.Message {
			m, _ := a.b.Heartbeat(protocol.HeartbeatPayload{Status: "alive"})
			return psMsg(t, m, bc.name, a.id, a.id)
		}},
		{"event on the heartbeat topic", "reject", "heartbeat topic", hbt, func() *ps.Message {
			m, _ := a.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
			return psMsg(t, m, hbt.name, a.id, a.id)
		}},
		{"event to one agent", "reject", "to \"*\" only", bc, func() *ps.Message {
			m, _ := a.b.Event("test:x:agent", protocol.IntentNotify, ev)
			return psMsg(t, m, bc.name, a.id, a.id)
		}},
		{"group message without group", "reject", "for group \"\"", grp, func() *ps.Message {
			m, _ := a.b.Request(protocol.Broadcast, protocol.IntentQuery, nil)
			return psMsg(t, m, grp.name, a.id, a.id)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := g.check(t.Context(), c.info, c.msg())
			if verdict(err) != c.want || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %s (%v), want %s with %q", verdict(err), err, c.want, c.why)
			}
		})
	}

	t.Run("expired", func(t *testing.T) {
		old := newSigner(t, "test:old:agent", func() time.Time { return time.Now().Add(-time.Hour - 5*time.Second) })
		m, _ := old.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
		if _, err := g.check(t.Context(), bc, psMsg(t, m, bc.name, old.id, relay)); verdict(err) != "ignore" {
			t.Fatalf("just expired while relayed: %s %v", verdict(err), err)
		}
		m, _ = old.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
		if _, err := g.check(t.Context(), bc, psMsg(t, m, bc.name, old.id, old.id)); verdict(err) != "reject" {
			t.Fatalf("expired from its author: %s %v", verdict(err), err)
		}
		older := newSigner(t, "test:older:agent", func() time.Time { return time.Now().Add(-2 * time.Hour) })
		m, _ = older.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
		if _, err := g.check(t.Context(), bc, psMsg(t, m, bc.name, older.id, relay)); verdict(err) != "reject" {
			t.Fatalf("long expired: %s %v", verdict(err), err)
		}
	})

	t.Run("rate", func(t *testing.T) {
		g := oneNode(t, WithPeerRate(rate.Limit(1), 3))
		f := newSigner(t, "test:flood:agent", nil)
		var verdicts []string
		for range 5 {
			m, _ := f.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
			_, err := g.check(t.Context(), bc, psMsg(t, m, bc.name, f.id, f.id))
			verdicts = append(verdicts, verdict(err))
		}
		if strings.Join(verdicts, ",") != "accept,accept,accept,reject,reject" {
			t.Fatalf("burst of 3 then flood from the author: %v", verdicts)
		}
		m, _ := f.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
		if _, err := g.check(t.Context(), bc, psMsg(t, m, bc.name, f.id, relay)); verdict(err) != "ignore" {
			t.Fatalf("over rate but relayed: %s", verdict(err))
		}
	})

	t.Run("oversize", func(t *testing.T) {
		m := &ps.Message{Message: &pb.Message{Data: make([]byte, protocol.MaxGossipBytes+1), From: []byte(a.id), Topic: &bc.name}, ReceivedFrom: a.id}
		if _, err := g.check(t.Context(), bc, m); verdict(err) != "reject" {
			t.Fatalf("oversize: %s", verdict(err))
		}
	})

	t.Run("group", func(t *testing.T) {
		m := &protocol.Message{}
		m.Envelope.Recipient = protocol.Recipient{AgentID: "*", Channel: "coordination", Extra: protocol.Extra{"group": json.RawMessage(`"code.review"`)}}
		m.Message = protocol.Body{Type: protocol.TypeRequest, Intent: protocol.IntentQuery, Payload: json.RawMessage(`{}`)}
		if err := a.b.Seal(m); err != nil {
			t.Fatal(err)
		}
		if v, err := g.check(t.Context(), grp, psMsg(t, m, grp.name, a.id, a.id)); err != nil || v.group != "code.review" {
			t.Fatalf("group message: %v", err)
		}
		other := topicInfo{name: g.GroupTopic("translate"), kind: kindGroup, group: "translate"}
		m2 := m.Clone()
		m2.Envelope.MessageID = ""
		if err := a.b.Seal(m2); err != nil {
			t.Fatal(err)
		}
		if _, err := g.check(t.Context(), other, psMsg(t, m2, other.name, a.id, a.id)); verdict(err) != "reject" {
			t.Fatalf("group message on another group's topic: %s", verdict(err))
		}
	})

	if s := g.Stats(); s.Rejected != 0 {
		t.Fatalf("check itself must not count; the validator wrapper does: %+v", s)
	}
}

func TestOptionsValidate(t *testing.T) {
	mn := testsupport.Mocknet(t, 1, testsupport.FirstPort(hostPort))
	h, sk := mn.Hosts[0], mn.Keys[0]
	b, _ := protocol.NewBuilder("test:opt:agent", sk, nil)
	for _, o := range []Option{
		WithHeartbeatInterval(500 * time.Millisecond),
		WithHeartbeatInterval(time.Hour),
		WithSuspectAfter(0),
		WithStuckAfter(time.Minute),
		WithTopicPrefix("iacp"),
		WithCapabilities([]string{"bad topic"}),
		WithPeerRate(0, 1),
		WithScoreInspection(time.Millisecond),
		WithMaxAgents(MinMaxAgents - 1),
		WithMaxAgents(MaxMaxAgents + 1),
		WithLocalHealth(-1),
		WithLocalHealth(maxHealthScore + 1),
	} {
		if g, err := New(h, b, o); err == nil {
			g.Close()
			t.Errorf("an invalid option was accepted")
		}
	}
	other, _ := protocol.NewBuilder("test:opt:other", testsupport.Key(t), nil)
	if _, err := New(h, other); err == nil {
		t.Error("a builder with another key was accepted")
	}
}

// The gossipsub id of a message is bound to its exact bytes and its claimed author: a forged
// copy of a genuine message (same message_id, other content) cannot take the genuine one's id
// and so cannot get it dropped as already seen; a copy re-published under another author is
// validated (and rejected as a replay) rather than dropped silently.
func TestMessageIDCannotBeSquatted(t *testing.T) {
	a := newSigner(t, "test:a:agent", nil)
	other := newSigner(t, "test:o:agent", nil).id
	good, _ := a.b.Event(protocol.Broadcast, protocol.IntentNotify, protocol.EventPayload{EventType: "deploy.done"})
	forged := *good
	forged.Message.Payload = json.RawMessage(`{"event_type":"forged"}`)
	genuine := psMsg(t, good, "t", a.id, other)
	if id := msgID(genuine.Message); id != msgID(psMsg(t, good, "t", a.id, a.id).Message) {
		t.Fatal("two copies of one document under one author have different ids")
	}
	if msgID(genuine.Message) == msgID(psMsg(t, &forged, "t", a.id, other).Message) {
		t.Fatal("a forged copy with the genuine message_id has the genuine id")
	}
	if msgID(genuine.Message) == msgID(psMsg(t, good, "t", other, other).Message) {
		t.Fatal("the document re-published under another author has the original id")
	}
	if msgID(genuine.Message) == msgID(psMsg(t, good, "other-topic", a.id, other).Message) {
		t.Fatal("the genuine bytes on another topic have the genuine id")
	}
	// The same bytes split differently between From and Data must not hash alike: 256 bytes
	// of author claim followed by the rest of the data.
	long := append([]byte(a.id), genuine.Data[:256]...)
	shifted := &pb.Message{From: long, Data: genuine.Data[256:], Topic: genuine.Topic}
	if msgID(genuine.Message) == msgID(shifted) {
		t.Fatal("bytes moved from Data into From keep the genuine id")
	}
}

// The slowest beat the options allow is usable with every other default: an agent is then
// stuck one beat after it is suspect, rather than before (which the draft's 600 s would mean).
func TestOptionsSlowestBeatKeepsStuckAfterSuspect(t *testing.T) {
	c := defaults()
	if err := WithHeartbeatInterval(MaxHeartbeatInterval)(&c); err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatalf("a %s beat with default timeouts: %v", MaxHeartbeatInterval, err)
	}
	if want := time.Duration(DefaultSuspectAfter+1) * MaxHeartbeatInterval; c.stuckAfter != want {
		t.Fatalf("stuck after %s, want %s", c.stuckAfter, want)
	}
	c = defaults()
	if err := c.validate(); err != nil || c.stuckAfter != DefaultStuckAfter {
		t.Fatalf("default beat: stuck after %s (%v), want the draft's %s", c.stuckAfter, err, DefaultStuckAfter)
	}
}

// An author's rate bucket is dropped after limiterIdle without a message; the sweep that
// drops it runs at most once every limiterPruneEvery.
func TestLimiterDropsIdleBuckets(t *testing.T) {
	l := newLimiter(1, 1)
	start := time.Unix(1_700_000_000, 0)
	l.allow("A", start)
	swept := start.Add(limiterIdle - 30*time.Second)
	l.prune(swept)
	if len(l.buckets) != 1 {
		t.Fatal("a bucket was dropped before it was idle for limiterIdle")
	}
	l.prune(start.Add(limiterIdle + time.Second))
	if len(l.buckets) != 1 {
		t.Fatal("a sweep ran within limiterPruneEvery of the last one")
	}
	l.prune(swept.Add(limiterPruneEvery))
	if len(l.buckets) != 0 {
		t.Fatal("the next sweep kept a bucket idle for longer than limiterIdle")
	}
}

// Nodes that share a verifier (WithVerifier) with a verification cache verify a heartbeat once
// between them: the receivers after the first answer from the cache.
func TestSharedVerifierVerifiesEachDocumentOnce(t *testing.T) {
	cache := protocol.NewVerifyCache(1 << 10)
	v := &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize), Verified: cache}
	m := newMesh(t, 4, func(int) []Option { return []Option{WithVerifier(v)} })
	m.waitFormed(t, 20*time.Second)
	testsupport.WaitFor(t, 10*time.Second, "verifications answered by the shared cache", func() bool { return cache.Hits() > 0 })
}

// The author check decides between reject and ignore: an author that sends a message itself
// and holds no certificate (ErrNotCertified) is rejected, which costs it gossipsub score; the
// same message relayed is ignored, since the relayer may not know; a check that reached no
// verdict ignores. A check never holds a validation past AuthorCheckWait, whatever its
// context.
func TestValidator_AuthorCheckVerdicts(t *testing.T) {
	uncertified := newSigner(t, "test:u:agent", nil)
	staller := newSigner(t, "test:s:agent", nil)
	waited := make(chan time.Duration, 1)
	g := oneNode(t, WithAuthorCheck(func(ctx context.Context, c AuthorClaim) error {
		switch c.Author {
		case uncertified.id:
			return fmt.Errorf("%w: peer %s answered without one", ErrNotCertified, c.Author)
		case staller.id:
			dl, ok := ctx.Deadline()
			if !ok {
				waited <- -1
			} else {
				waited <- time.Until(dl)
			}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}))
	bc := topicInfo{name: g.broadcastTopic(), kind: kindBroadcast}
	relay := newSigner(t, "test:r:agent", nil).id
	ev := protocol.EventPayload{EventType: "x"}
	send := func(s signer, via peer.ID) error {
		m, _ := s.b.Event(protocol.Broadcast, protocol.IntentNotify, ev)
		_, err := g.check(context.Background(), bc, psMsg(t, m, bc.name, s.id, via))
		return err
	}
	if err := send(uncertified, uncertified.id); verdict(err) != "reject" || !errors.Is(err, ErrNotCertified) {
		t.Fatalf("an uncertified author sending itself: %s (%v); want reject", verdict(err), err)
	}
	if err := send(uncertified, relay); verdict(err) != "ignore" {
		t.Fatalf("the same relayed: %s (%v); want ignore", verdict(err), err)
	}
	if err := send(staller, staller.id); verdict(err) != "ignore" {
		t.Fatalf("a check with no verdict: %s (%v); want ignore", verdict(err), err)
	}
	if d := <-waited; d <= 0 || d > AuthorCheckWait {
		t.Fatalf("the check was given %v; want at most AuthorCheckWait (%v)", d, AuthorCheckWait)
	}
}

// An author the node shuns (WithAuthorShun) is turned away before its signature is verified:
// its message, here with a forged signature, is ignored rather than rejected for the
// signature. A heartbeat that carries a certificate is never shunned, and others' messages
// are checked as ever.
func TestValidator_ShunnedAuthorsCostNoSignatureCheck(t *testing.T) {
	shunned := newSigner(t, "test:s:agent", nil)
	other := newSigner(t, "test:o:agent", nil)
	// Only asks about the shunned author count: the node's own beats, validated on gossipsub's
	// goroutines meanwhile, carry no certificate here and are asked about too.
	var asked atomic.Int32
	g := oneNode(t, WithAuthorShun(func(author, via peer.ID) bool {
		if author != shunned.id {
			return false
		}
		asked.Add(1)
		return true
	}))
	bc := topicInfo{name: g.broadcastTopic(), kind: kindBroadcast}
	hbt := topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}
	forged := func(s signer) *ps.Message {
		m, _ := s.b.Event(protocol.Broadcast, protocol.IntentNotify, protocol.EventPayload{EventType: "x"})
		m.Message.Payload = json.RawMessage(`{"event_type":"forged"}`)
		return psMsg(t, m, bc.name, s.id, s.id)
	}
	if _, err := g.check(context.Background(), bc, forged(shunned)); verdict(err) != "ignore" || !strings.Contains(err.Error(), "would not come now") {
		t.Fatalf("a shunned author's forged message: %s (%v); want ignored before the signature", verdict(err), err)
	}
	if _, err := g.check(context.Background(), bc, forged(other)); verdict(err) != "reject" || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("another author's forged message: %s (%v); want rejected for its signature", verdict(err), err)
	}
	hb, _ := shunned.b.Heartbeat(protocol.HeartbeatPayload{Status: "alive"})
	raw, _ := json.Marshal(heartbeatWire{HeartbeatPayload: protocol.HeartbeatPayload{Status: "alive"}, Certificate: "a certificate"})
	hb.Message.Payload = raw
	before := asked.Load()
	if _, err := g.check(context.Background(), hbt, psMsg(t, hb, hbt.name, shunned.id, shunned.id)); err != nil && strings.Contains(err.Error(), "would not come now") {
		t.Fatalf("a heartbeat that carries a certificate was shunned: %v", err)
	}
	if asked.Load() != before {
		t.Fatal("the shun was asked about a message that carries a certificate")
	}
}
