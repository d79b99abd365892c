package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// A request sent again with its own message id (a sender that crashed before it took the
// answer, a resumed workflow) gets the answer the agent gave the first time, and the agent
// does not see it twice.
func TestAnswered_AResentRequestGetsTheFirstAnswer(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	var runs atomic.Int32
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		n := runs.Add(1)
		return r.Reply(protocol.ResponseAccepted, map[string]int32{"run": n})
	})
	q, err := a.Builder().Request(agentName(1), protocol.IntentHandoff, map[string]string{"task": "x"}, protocol.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.Request(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	// The first Request's claim on the id ends once its delivery settled (an engine detail): a
	// resend from a restarted node has none.
	var again *protocol.Message
	testsupport.WaitFor(t, 5*time.Second, "the first send to settle", func() bool {
		again, err = a.Request(testCtx(t), q)
		return protocol.CodeOf(err) != protocol.CodeDuplicate
	})
	if err != nil {
		t.Fatalf("the resent request: %v, want the first answer", err)
	}
	if again.Envelope.MessageID != first.Envelope.MessageID || string(again.Message.Payload) != string(first.Message.Payload) {
		t.Fatalf("resent request answered %s %s, want the first answer %s %s", again.Envelope.MessageID, again.Message.Payload, first.Envelope.MessageID, first.Message.Payload)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the agent ran the request %d times, want once", n)
	}
	// The book keeps an answer before it leaves, so a resend of the request can carry it to
	// the sender first; the agent's own send of it then meets DUPLICATE there, and is told it
	// was delivered, which it was.
	if err := b.Send(testCtx(t), first); err != nil {
		t.Fatalf("sending an answer the book already gave: %v, want delivered", err)
	}
}

// The book keeps at most answeredPerSender answers of one sender, and forgets an answer when
// its request expires.
func TestAnswered_Bounds(t *testing.T) {
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.NewBuilder("test:mesh:a", k, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var book answered
	now := time.Now()
	var reqs []*protocol.Message
	for range answeredPerSender + 10 {
		q, err := b.Request("test:mesh:b", protocol.IntentHandoff, map[string]string{}, protocol.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, q)
		book.record(q.Envelope.MessageID, q.Envelope.Sender.AgentID, q.Expires(), q, now)
	}
	if len(book.byID) != answeredPerSender {
		t.Fatalf("book holds %d answers of one sender, want %d", len(book.byID), answeredPerSender)
	}
	if _, ok := book.lookup(reqs[0], now); !ok {
		t.Fatal("a kept answer is not found")
	}
	if _, ok := book.lookup(reqs[0], now.Add(2*time.Minute)); ok {
		t.Fatal("an answer outlived its request")
	}
	other := *reqs[0]
	other.Envelope.Sender.AgentID = "test:mesh:mallory"
	if _, ok := book.lookup(&other, now); ok {
		t.Fatal("another sender got the answer")
	}
}
