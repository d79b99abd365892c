package node

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

var needsApproval = protocol.WithSecurity(protocol.Security{RequireApproval: true})

// approvalEvent builds an event to `to` that requires approval.
func approvalEventMsg(t *testing.T, b *protocol.Builder, to string, opts ...protocol.Option) *protocol.Message {
	t.Helper()
	m, err := b.Event(to, protocol.IntentNotify, protocol.EventPayload{EventType: "deploy"}, append([]protocol.Option{needsApproval}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// auditEvents returns the audit entries of n about id, in order.
func auditEvents(t *testing.T, n *Node, id string) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	err := audit.Tail(testCtx(t), n.Config().DataDir+"/audit", 0, false, func(e audit.Entry) error {
		if e.MessageID == id {
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hasEvent(es []audit.Entry, ev audit.Event, by string) bool {
	for _, e := range es {
		if e.Event == ev && e.By == by {
			return true
		}
	}
	return false
}

// The proof: approval holds a message until approved; the recipient sees nothing
// before, and exactly once after. The decision and who made it are in the audit log and on
// the event stream.
func TestApproval_HeldUntilApprovedThenDeliveredOnce(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRetry(50*time.Millisecond, 200*time.Millisecond)}, nil)
	a, b := m.nodes[0], m.nodes[1]
	var got atomic.Int32
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got.Add(1); return nil })
	ev := approvalEventMsg(t, a.Builder(), agentName(1))
	id := ev.Envelope.MessageID
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatalf("Send of a message that requires approval: %v", err)
	}
	held, err := a.Approvals().List()
	if err != nil || len(held) != 1 || held[0].MessageID != id || held[0].To != agentName(1) || held[0].ApprovedBy != "" || len(held[0].Payload) == 0 {
		t.Fatalf("Approvals: %+v %v", held, err)
	}
	if es, _ := a.OutboxEntries(); len(es) != 0 {
		t.Fatalf("a held message is in the outbox: %+v", es)
	}
	time.Sleep(300 * time.Millisecond) // several retry ticks: a held message is never attempted
	if got.Load() != 0 {
		t.Fatal("the recipient got a message nobody approved")
	}
	if err := a.Approvals().Approve(testCtx(t), id, "alice"); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the approved message to arrive", func() bool { return got.Load() == 1 })
	if err := a.Approvals().Approve(testCtx(t), id, "alice"); !errors.Is(err, ErrNotHeld) || protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("approving a sent message again: %v; want ErrNotHeld", err)
	}
	time.Sleep(300 * time.Millisecond)
	if got.Load() != 1 {
		t.Fatalf("the recipient got the message %d times, want once", got.Load())
	}
	if held, _ := a.Approvals().List(); len(held) != 0 {
		t.Fatalf("still held after approval: %+v", held)
	}
	es := auditEvents(t, a, id)
	if !hasEvent(es, audit.EventHeld, "") || !hasEvent(es, audit.EventApproved, "alice") || !hasEvent(es, audit.EventSent, "") {
		t.Fatalf("audit entries %+v: want held, approved by alice, sent", es)
	}
	evs, last, _ := a.Approvals().Events(0)
	if len(evs) != 2 || last != 2 || evs[0].Kind != ApprovalHeld || evs[1].Kind != ApprovalApproved || evs[1].By != "alice" || evs[0].ExpiresAt.IsZero() {
		t.Fatalf("approval events: %+v", evs)
	}
}

// A rejection reaches the sender as an error: a Request returns PERMISSION_DENIED for its
// message id; a Send's agent gets a PERMISSION_DENIED error correlated to it.
func TestApproval_RejectionReachesTheSenderAsAnError(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	var got atomic.Int32
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		got.Add(1)
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got.Add(1); return nil })
	errs := make(chan *protocol.Message, 1)
	a.HandleOther(func(ctx context.Context, r *Request) error { errs <- r.Msg; return nil })

	req, err := a.Builder().Request(agentName(1), protocol.IntentHandoff, map[string]any{"deploy": "prod"}, needsApproval)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		m   *protocol.Message
		err error
	}
	done := make(chan answer, 1)
	go func() { r, err := a.Request(testCtx(t), req); done <- answer{r, err} }()
	testsupport.WaitFor(t, 5*time.Second, "the request to be held", func() bool { h, _ := a.Approvals().List(); return len(h) == 1 })
	if err := a.Approvals().Reject(testCtx(t), req.Envelope.MessageID, "bob", "not on a Friday"); err != nil {
		t.Fatal(err)
	}
	select {
	case ans := <-done:
		var pe *protocol.Error
		if !errors.As(ans.err, &pe) || pe.Code != protocol.CodePermissionDenied || !contains(pe.Message, "bob") || !contains(pe.Message, "not on a Friday") {
			t.Fatalf("Request after a rejection: %v; want PERMISSION_DENIED naming who and why", ans.err)
		}
		if ans.m == nil || ans.m.Envelope.CorrelationID != req.Envelope.MessageID {
			t.Fatalf("the error message %+v is not correlated to the request", ans.m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Request did not return after the rejection")
	}

	ev := approvalEventMsg(t, a.Builder(), agentName(1))
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	if err := a.Approvals().Reject(testCtx(t), ev.Envelope.MessageID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-errs:
		pe, err := protocol.ErrorOf(e)
		if err != nil || pe.Code != protocol.CodePermissionDenied || e.Envelope.CorrelationID != ev.Envelope.MessageID {
			t.Fatalf("got %s / %v, want a PERMISSION_DENIED error correlated to the message", e.Message.Payload, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no PERMISSION_DENIED error for the agent that used Send")
	}
	if got.Load() != 0 {
		t.Fatal("a rejected message reached the recipient")
	}
	if err := a.Approvals().Reject(testCtx(t), ev.Envelope.MessageID, "bob", ""); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("rejecting twice: %v; want ErrNotHeld", err)
	}
	es := auditEvents(t, a, req.Envelope.MessageID)
	if !hasEvent(es, audit.EventRejected, "bob") || hasEvent(es, audit.EventSent, "") {
		t.Fatalf("audit entries %+v: want rejected by bob, never sent", es)
	}
	for _, bad := range []struct{ by, reason string }{{"", ""}, {"a\x00b", ""}, {"bob", string(make([]byte, MaxApprovalReason+1))}} {
		if err := a.Approvals().Reject(testCtx(t), ev.Envelope.MessageID, bad.by, bad.reason); protocol.CodeOf(err) != protocol.CodePayloadInvalid || errors.Is(err, ErrNotHeld) {
			t.Errorf("Reject by %q: %v; want PAYLOAD_INVALID about by or reason", bad.by, err)
		}
	}
}

// Nobody deciding within the TTL is TIMEOUT: to a Request, and to a Send's agent; the held
// message is dropped and audited "expired".
func TestApproval_ExpiryIsTimeout(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a := m.nodes[0]
	errs := make(chan *protocol.Message, 2)
	a.HandleOther(func(ctx context.Context, r *Request) error { errs <- r.Msg; return nil })
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, map[string]any{}, needsApproval, protocol.WithTTL(time.Second))
	if _, err := a.Request(testCtx(t), req); protocol.CodeOf(err) != protocol.CodeTimeout {
		t.Fatalf("Request nobody approved: %v; want TIMEOUT", err)
	}
	ev := approvalEventMsg(t, a.Builder(), agentName(1), protocol.WithTTL(time.Second))
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-errs:
			pe, err := protocol.ErrorOf(e)
			if err != nil || pe.Code != protocol.CodeTimeout {
				t.Fatalf("got %s / %v, want TIMEOUT", e.Message.Payload, err)
			}
			if e.Envelope.CorrelationID != ev.Envelope.MessageID {
				continue // the request's, after Request stopped waiting
			}
		case <-deadline:
			t.Fatal("no TIMEOUT error for the agent that used Send")
		}
		break
	}
	testsupport.WaitFor(t, 5*time.Second, "the expired messages to leave the approvals", func() bool { h, _ := a.Approvals().List(); return len(h) == 0 })
	for _, id := range []string{req.Envelope.MessageID, ev.Envelope.MessageID} {
		if es := auditEvents(t, a, id); !hasEvent(es, audit.EventExpired, "") || hasEvent(es, audit.EventSent, "") {
			t.Fatalf("audit entries of %s: %+v; want expired, never sent", id, es)
		}
	}
	if err := a.Approvals().Approve(testCtx(t), ev.Envelope.MessageID, "alice"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("approving an expired message: %v; want ErrNotHeld", err)
	}
}

// A held message survives a restart of its node (real TCP hosts on loopback, the same data
// directory) and is sent when approved after it.
func TestApproval_HeldMessageSurvivesRestart(t *testing.T) {
	b, err := New(WithDataDir(t.TempDir()), WithAgent("test:approve:b", protocolManifest()), WithNAT(false),
		WithDiscovery(false), WithGossip(false), WithListen("/ip4/127.0.0.1/tcp/0"), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got atomic.Int32
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got.Add(1); return nil })
	dir := t.TempDir()
	key, _, _ := crypto.GenerateEd25519Key(nil)
	start := func() *Node {
		n, err := New(WithDataDir(dir), WithKey(key), WithAgent("test:approve:a", protocolManifest()), WithNAT(false),
			WithDiscovery(false), WithGossip(false), WithListen("/ip4/127.0.0.1/tcp/0"), WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		n.AddPeer("test:approve:b", peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()})
		return n
	}
	a := start()
	ev := approvalEventMsg(t, a.Builder(), "test:approve:b")
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = start()
	defer a.Close()
	held, err := a.Approvals().List()
	if err != nil || len(held) != 1 || held[0].MessageID != ev.Envelope.MessageID {
		t.Fatalf("after a restart: %+v %v; want the held message", held, err)
	}
	if got.Load() != 0 {
		t.Fatal("the restart sent a message nobody approved")
	}
	if err := a.Approvals().Approve(testCtx(t), ev.Envelope.MessageID, "carol"); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the approved message to arrive", func() bool { return got.Load() == 1 })
}

// The approvals are bounded (RATE_LIMITED past approval_max), and need the store.
func TestApproval_BoundedAndNeedsTheStore(t *testing.T) {
	m := newMesh(t, 2, []Option{WithApprovals(1, 64<<20)}, func(i int, _ *mesh) []Option {
		if i == 1 {
			return []Option{WithDurable(false)}
		}
		return nil
	})
	a, b := m.nodes[0], m.nodes[1]
	if err := a.Send(testCtx(t), approvalEventMsg(t, a.Builder(), agentName(1))); err != nil {
		t.Fatal(err)
	}
	err := a.Send(testCtx(t), approvalEventMsg(t, a.Builder(), agentName(1)))
	if protocol.CodeOf(err) != protocol.CodeRateLimited || !contains(err.Error(), "approve or reject some") {
		t.Fatalf("a second held message over approval_max 1: %v; want RATE_LIMITED saying what to do", err)
	}
	err = b.Send(testCtx(t), approvalEventMsg(t, b.Builder(), agentName(0)))
	if protocol.CodeOf(err) != protocol.CodeCapabilityMismatch || !contains(err.Error(), "durable") {
		t.Fatalf("approval without a store: %v; want CAPABILITY_MISMATCH naming durable", err)
	}
	if err := b.Approvals().Approve(testCtx(t), "x", "alice"); protocol.CodeOf(err) != protocol.CodeCapabilityMismatch {
		t.Fatalf("Approve without a store: %v", err)
	}
}
