package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// Async-first: "Messages MUST be queued until the recipient is available." A recipient that
// is unreachable when Send is called gets the message when it comes back.
func TestDurable_OfflineRecipientGetsMessageWhenItReturns(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRetry(50*time.Millisecond, 200*time.Millisecond)}, nil)
	a, b := m.nodes[0], m.nodes[1]
	got := make(chan string, 4)
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got <- r.Msg.Envelope.MessageID; return nil })
	unlink(t, m, a, b)
	ev := event(t, a.Builder(), agentName(1))
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatalf("Send to an unreachable recipient must queue, got %v", err)
	}
	entries, _ := a.OutboxEntries()
	if len(entries) != 1 || entries[0].MessageID != ev.Envelope.MessageID {
		t.Fatalf("outbox holds %v, want the message", entries)
	}
	time.Sleep(300 * time.Millisecond) // several failed attempts
	relinkAndReceive(t, m, a, b, got, ev)
	testsupport.WaitFor(t, 5*time.Second, "outbox to empty", func() bool { e, _ := a.OutboxEntries(); return len(e) == 0 })
}

// A message still queued when its TTL passes produces a TIMEOUT error at the sender,
// correlated to it, and an "expired" audit entry.
func TestDurable_ExpiredMessageBecomesTimeoutForSender(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRetry(50*time.Millisecond, 100*time.Millisecond)}, nil)
	a, b := m.nodes[0], m.nodes[1]
	errs := make(chan *protocol.Message, 1)
	a.HandleOther(func(ctx context.Context, r *Request) error { errs <- r.Msg; return nil })
	_ = m.mn.UnlinkPeers(a.ID(), b.ID())
	_ = m.mn.DisconnectPeers(a.ID(), b.ID())
	ev, _ := a.Builder().Event(agentName(1), protocol.IntentNotify, protocol.EventPayload{EventType: "x"}, protocol.WithTTL(time.Second))
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-errs:
		pe, err := protocol.ErrorOf(e)
		if err != nil || pe.Code != protocol.CodeTimeout || e.Envelope.CorrelationID != ev.Envelope.MessageID {
			t.Fatalf("got %s / %v, want a TIMEOUT error correlated to the message", e.Message.Payload, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no TIMEOUT error after the TTL")
	}
	var expired int
	_ = audit.Tail(testCtx(t), a.Config().DataDir+"/audit", 0, false, func(e audit.Entry) error {
		if e.Event == audit.EventExpired && e.MessageID == ev.Envelope.MessageID {
			expired++
		}
		return nil
	})
	if expired != 1 {
		t.Fatalf("%d expired audit entries, want 1", expired)
	}
}

// Exactly-once to the agent: a message accepted but not taken before a restart is offered
// again after it, and the same message resent is recognised (DUPLICATE) and not handed over a
// second time. Real TCP hosts on loopback, the same data directory across the restart.
func TestDurable_ExactlyOnceAcrossRestart(t *testing.T) {
	start, _ := restartable(t, "test:restart:b")
	b := start()
	a := loopbackSender(t, "test:restart:a", b)
	ev := event(t, a.Builder(), "test:restart:b")
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	if b.Inbox().Len() != 1 {
		es, _ := a.OutboxEntries()
		for _, e := range es {
			t.Logf("outbox: %+v", e)
		}
		t.Fatalf("inbox holds %d, want the message", b.Inbox().Len())
	}
	b.Close() // the agent never took it
	b = start()
	if b.Inbox().Len() != 1 {
		t.Fatalf("after restart the inbox holds %d, want the message offered again", b.Inbox().Len())
	}
	a.AddPeer("test:restart:b", peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()})
	// The sender resends the very same message (as after its own crash): acknowledged as a
	// duplicate, not handed to the agent twice.
	code, _ := dialRaw(t, a, b).refusal(ev)
	expectCode(t, code, protocol.CodeDuplicate)
	if b.Inbox().Len() != 1 {
		t.Fatalf("inbox holds %d after the resend, want 1", b.Inbox().Len())
	}
	if err := b.Inbox().Ack(ev.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = start()
	defer b.Close()
	if b.Inbox().Len() != 0 {
		t.Fatalf("a taken message came back after restart")
	}
}

// A handler's acknowledgement does not wait for the store (the removal rides in its
// next commit); the audit log's "acked" entry, written first, is what a restart goes by. A
// crash between the two (here: the entry appended while the node is down, the message still
// pending in the store) does not offer the message again, and the store forgets it.
func TestDurable_AckedInTheAuditLogIsNotOfferedAgain(t *testing.T) {
	start, dir := restartable(t, "test:acked:b")
	b := start()
	a := loopbackSender(t, "test:acked:a", b)
	taken, kept := event(t, a.Builder(), "test:acked:b"), event(t, a.Builder(), "test:acked:b")
	for _, ev := range []*protocol.Message{taken, kept} {
		if err := a.Send(testCtx(t), ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Inbox().Len(); n != 2 {
		t.Fatalf("inbox holds %d, want both messages", n)
	}
	b.Close()
	lg, err := audit.Open(dir + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Append(audit.Entry{Event: audit.EventAcked, MessageID: taken.Envelope.MessageID}); err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	b = start()
	defer b.Close()
	if ds := b.Inbox().List(0); len(ds) != 1 || ds[0].Msg.Envelope.MessageID != kept.Envelope.MessageID {
		t.Fatalf("after restart the inbox holds %d messages, want only the one not acked", len(ds))
	}
	if p, err := keptOf(t, b).store.Pending(); err != nil || len(p) != 1 {
		t.Fatalf("the store holds %d pending (%v), want the acked one forgotten", len(p), err)
	}
}

// RequestOnce is for callers with their own retry (coord): with durable delivery on, a request
// to an unreachable recipient fails at once, and nothing is left in the outbox to be resent
// behind the caller's back; to a reachable one it is answered like Request.
func TestDurable_RequestOnceKeepsNothingInTheOutbox(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRetry(50*time.Millisecond, 200*time.Millisecond)}, nil)
	a, b := m.nodes[0], m.nodes[1]
	b.Handle(protocol.IntentQuery, func(ctx context.Context, r *Request) error {
		return r.Reply("accepted", map[string]string{"ok": "yes"})
	})
	q, err := a.Builder().Request(agentName(1), protocol.IntentQuery, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := a.RequestOnce(testCtx(t), q); err != nil || resp.Message.Type != protocol.TypeResponse {
		t.Fatalf("RequestOnce to a reachable agent: %v, %v", resp, err)
	}
	if err := m.mn.UnlinkPeers(a.ID(), b.ID()); err != nil {
		t.Fatal(err)
	}
	_ = m.mn.DisconnectPeers(a.ID(), b.ID())
	q, err = a.Builder().Request(agentName(1), protocol.IntentQuery, map[string]string{}, protocol.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RequestOnce(testCtx(t), q); err == nil {
		t.Fatal("RequestOnce to an unreachable agent answered")
	}
	if entries, err := a.OutboxEntries(); err != nil || len(entries) != 0 {
		t.Fatalf("outbox holds %v (%v), want nothing", entries, err)
	}
}

// A node that must fetch a recipient's certificate before it delivers (it never heard the
// recipient's beats, or forgot its certificate) and cannot reach the recipient has learnt
// nothing about that certificate: the message waits in the outbox like any other whose
// recipient is down, and arrives when the recipient comes back. Before, the failed fetch was
// taken as IDENTITY_INVALID, a refusal: the message was dropped from the outbox, and the
// recipient's certificate refused for 30 s more.
func TestDurable_ARecipientDownBeforeItsCertificateIsFetchedGetsItsMessage(t *testing.T) {
	m, _ := certifiedMeshWith(t, 3, []Option{WithRetry(50*time.Millisecond, 200*time.Millisecond)})
	alice, bob := m.nodes[1], m.nodes[2]
	got := make(chan string, 4)
	bob.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got <- r.Msg.Envelope.MessageID; return nil })
	if err := alice.Send(testCtx(t), event(t, alice.Builder(), agentName(2))); err != nil {
		t.Fatal(err)
	}
	<-got                            // alice knows where bob is
	alice.trust.Forget("", bob.ID()) // its certificate, to be fetched again
	unlink(t, m, alice, bob)
	ev := event(t, alice.Builder(), agentName(2))
	if err := alice.Send(testCtx(t), ev); err != nil {
		t.Fatalf("Send to an unreachable recipient must queue, got %v", err)
	}
	time.Sleep(300 * time.Millisecond) // several attempts, each failing to fetch the certificate
	if entries, _ := alice.OutboxEntries(); len(entries) != 1 || entries[0].MessageID != ev.Envelope.MessageID {
		t.Fatalf("outbox holds %v after failed certificate fetches, want the message", entries)
	}
	relinkAndReceive(t, m, alice, bob, got, ev)
}

// A message the agent had not taken before a restart is offered again by New, before a
// handler registered with Handle could take it: it waits in the inbox. A handler given with
// WithHandler is in place before that, and gets it. (The simulator registered its agents'
// handlers after New, and counted a message that reached a restarting node in that window as
// lost.)
func TestDurable_AHandlerGivenToNewGetsWhatARestartOffersAgain(t *testing.T) {
	start, _ := restartable(t, "test:restart:b")
	b := start()
	a := loopbackSender(t, "test:restart:a", b)
	ev := event(t, a.Builder(), "test:restart:b")
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	b.Close() // the agent never took it

	b = start()
	got := make(chan string, 2)
	b.Handle(protocol.IntentNotify, func(_ context.Context, r *Request) error { got <- r.Msg.Envelope.MessageID; return nil })
	if n := b.Inbox().Len(); n != 1 {
		t.Fatalf("with the handler registered after New, the inbox holds %d, want the message offered again", n)
	}
	b.Close()

	b = start(WithHandler(protocol.IntentNotify, func(_ context.Context, r *Request) error {
		got <- r.Msg.Envelope.MessageID
		return nil
	}))
	defer b.Close()
	expectHandled(t, got, ev, "the handler given to New")
	testsupport.WaitFor(t, 5*time.Second, "the message taken", func() bool { return b.Inbox().Len() == 0 })
}

// WithOtherHandler is the same for what no intent handler takes.
func TestDurable_AnOtherHandlerGivenToNewGetsWhatARestartOffersAgain(t *testing.T) {
	start, _ := restartable(t, "test:other:b")
	b := start()
	a := loopbackSender(t, "test:other:a", b)
	ev, err := a.Builder().Event("test:other:b", "x-custom", protocol.EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	b.Close() // the agent never took it
	got := make(chan string, 1)
	b = start(WithOtherHandler(func(_ context.Context, r *Request) error { got <- r.Msg.Envelope.MessageID; return nil }))
	defer b.Close()
	expectHandled(t, got, ev, "the other handler given to New")
}

func TestWithHandler_RefusesANilHandler(t *testing.T) {
	for _, o := range []Option{WithHandler(protocol.IntentNotify, nil), WithOtherHandler(nil)} {
		if _, err := New(WithAgent("test:nil:handler", protocolManifest()), o); err == nil || !strings.Contains(err.Error(), "nil") {
			t.Fatalf("New with a nil handler: %v, want an error saying so", err)
		}
	}
}

// restartable returns start, which starts the node of agent id on loopback TCP, durable, with
// its inbox on, always on the same data directory (dir) and key: each call after the first is
// a restart (of a node the test closed). opts come after these.
func restartable(t *testing.T, id string) (start func(opts ...Option) *Node, dir string) {
	t.Helper()
	dir = t.TempDir()
	key, _, _ := crypto.GenerateEd25519Key(nil)
	return func(opts ...Option) *Node {
		t.Helper()
		n, err := New(append([]Option{WithDataDir(dir), WithKey(key), WithAgent(id, protocolManifest()),
			WithInbox(true), WithNAT(false), WithDiscovery(false), WithGossip(false),
			WithListen("/ip4/127.0.0.1/tcp/0"), WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}, dir
}

// loopbackSender starts the node of agent id on loopback TCP, knowing where b is; the test's
// cleanup closes it.
func loopbackSender(t *testing.T, id string, b *Node) *Node {
	t.Helper()
	a, err := New(WithDataDir(t.TempDir()), WithAgent(id, protocolManifest()), WithNAT(false),
		WithDiscovery(false), WithGossip(false), WithListen("/ip4/127.0.0.1/tcp/0"), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.AddPeer(b.AgentID(), peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()})
	return a
}

// unlink cuts a from b on the mocknet: no connection, and none can be made.
func unlink(t *testing.T, m *mesh, a, b *Node) {
	t.Helper()
	if err := m.mn.UnlinkPeers(a.ID(), b.ID()); err != nil {
		t.Fatal(err)
	}
	_ = m.mn.DisconnectPeers(a.ID(), b.ID())
}

// relinkAndReceive links a and b again and waits for b's handler to report ev (on got).
func relinkAndReceive(t *testing.T, m *mesh, a, b *Node, got <-chan string, ev *protocol.Message) {
	t.Helper()
	if _, err := m.mn.LinkPeers(a.ID(), b.ID()); err != nil {
		t.Fatal(err)
	}
	expectHandled(t, got, ev, "the recipient that came back")
}

// expectHandled waits for a handler (who, for the failure) to report ev's id on got.
func expectHandled(t *testing.T, got <-chan string, ev *protocol.Message, who string) {
	t.Helper()
	select {
	case id := <-got:
		if id != ev.Envelope.MessageID {
			t.Fatalf("%s got %s, want %s", who, id, ev.Envelope.MessageID)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s never got the queued message", who)
	}
}

// keptOf is what n's durable delivery keeps (the store and the engine); n has durable
// delivery on.
func keptOf(t *testing.T, n *Node) *kept {
	t.Helper()
	k, ok := n.durable.keeper.(*kept)
	if !ok {
		t.Fatal("durable delivery is off on this node")
	}
	return k
}

// auditLogOf is n's audit log; n has it on.
func auditLogOf(t *testing.T, n *Node) *auditLog {
	t.Helper()
	a, ok := n.durable.auditor.(*auditLog)
	if !ok {
		t.Fatal("the audit log is off on this node")
	}
	return a
}
