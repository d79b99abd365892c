package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// A node delivers to its own agent: a request to itself reaches its handler and its answer
// comes back, with and without durable delivery; the audit log says sent, received and
// delivered as for any message.
func TestLocal_RequestToOwnAgentIsAnswered(t *testing.T) {
	for _, durable := range []bool{true, false} {
		m := newMesh(t, 1, []Option{WithDurable(durable)}, nil)
		a := m.nodes[0]
		a.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
			return r.Reply(protocol.ResponseAccepted, map[string]any{"echo": "self"})
		})
		req, err := a.Builder().Request(agentName(0), protocol.IntentHandoff, map[string]any{"x": 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := a.Request(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("durable %v: a request to the node's own agent: %v", durable, err)
		}
		if resp.Envelope.CorrelationID != req.Envelope.MessageID || resp.Envelope.Sender.AgentID != agentName(0) {
			t.Fatalf("durable %v: answer %+v is not the agent's answer to the request", durable, resp.Envelope)
		}
		if durable {
			events := countEvents(t, a, req.Envelope.MessageID)
			for _, want := range []audit.Event{audit.EventSent, audit.EventReceived} {
				if events[want] != 1 {
					t.Fatalf("audit of the request: %v, want one %s", events, want)
				}
			}
		}
	}
}

// An event to the node's own agent waits in its inbox, from its own peer.
func TestLocal_EventToOwnAgentReachesTheInbox(t *testing.T) {
	m := newMesh(t, 1, []Option{WithInbox(true)}, nil)
	a := m.nodes[0]
	ev := event(t, a.Builder(), agentName(0))
	out, err := a.Submit(testCtx(t), ev)
	if err != nil || out != OutcomeDelivered {
		t.Fatalf("Submit to the own agent: %q, %v; want delivered", out, err)
	}
	items := a.Inbox().List(0)
	if len(items) != 1 || items[0].Msg.Envelope.MessageID != ev.Envelope.MessageID || items[0].Peer != a.ID() {
		t.Fatalf("inbox holds %+v, want the event from the node's own peer", items)
	}
}

// A mistyped agent id fails at once with AGENT_NOT_FOUND: nothing knows it (no directory
// entry, pin or DHT record), and nothing is queued. QueueUnknown queues it instead, for an
// agent that will join later.
func TestUnknownRecipient_RefusedAtOnceUnlessQueued(t *testing.T) {
	m := newMesh(t, 1, nil, nil)
	a := m.nodes[0]
	ev := event(t, a.Builder(), "test:mesh:typo")
	_, err := a.Submit(testCtx(t), ev)
	if protocol.CodeOf(err) != protocol.CodeAgentNotFound || !errors.Is(err, errUnknown) {
		t.Fatalf("a send to an unknown agent: %v; want AGENT_NOT_FOUND saying nothing knows it", err)
	}
	if entries, _ := a.OutboxEntries(); len(entries) != 0 {
		t.Fatalf("the outbox holds %v after a refused send", entries)
	}
	req, _ := a.Builder().Request("test:mesh:typo", protocol.IntentHandoff, nil)
	if _, err := a.Request(testCtx(t), req); protocol.CodeOf(err) != protocol.CodeAgentNotFound {
		t.Fatalf("a request to an unknown agent: %v; want AGENT_NOT_FOUND", err)
	}
	out, err := a.Submit(testCtx(t), event(t, a.Builder(), "test:mesh:later"), QueueUnknown())
	if err != nil || out != OutcomeQueued {
		t.Fatalf("QueueUnknown: %q, %v; want queued", out, err)
	}
}

// A known agent that cannot be reached is queued, and Submit says queued, not delivered.
func TestKnownButOffline_IsQueued(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRetry(50*time.Millisecond, 200*time.Millisecond)}, nil)
	a, b := m.nodes[0], m.nodes[1]
	unlink(t, m, a, b)
	out, err := a.Submit(testCtx(t), event(t, a.Builder(), agentName(1)))
	if err != nil || out != OutcomeQueued {
		t.Fatalf("Submit to an unreachable known agent: %q, %v; want queued", out, err)
	}
}

// A request's life is its caller's: once Request gave up (its deadline passed), the request
// leaves the outbox, and the agent, back after that, never gets it. Cancelling a queued
// message by id (CancelOutbox) does the same for a Send.
func TestRequest_GivenUpIsNeverDelivered(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRetry(50*time.Millisecond, 100*time.Millisecond)}, nil)
	a, b := m.nodes[0], m.nodes[1]
	got := make(chan string, 4)
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		got <- r.Msg.Envelope.MessageID
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got <- r.Msg.Envelope.MessageID; return nil })
	unlink(t, m, a, b)
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := a.Request(ctx, req)
	cancel()
	if protocol.CodeOf(err) != protocol.CodeTimeout {
		t.Fatalf("a request to an unreachable agent: %v; want TIMEOUT", err)
	}
	ev := event(t, a.Builder(), agentName(1))
	if out, err := a.Submit(testCtx(t), ev); err != nil || out != OutcomeQueued {
		t.Fatalf("Submit: %q, %v", out, err)
	}
	if ok, err := a.CancelOutbox(ev.Envelope.MessageID); !ok || err != nil {
		t.Fatalf("CancelOutbox of a queued message: %v, %v", ok, err)
	}
	if ok, _ := a.CancelOutbox(ev.Envelope.MessageID); ok {
		t.Fatal("CancelOutbox found a message it had cancelled already")
	}
	if entries, _ := a.OutboxEntries(); len(entries) != 0 {
		t.Fatalf("the outbox still holds %v", entries)
	}
	if _, err := m.mn.LinkPeers(a.ID(), b.ID()); err != nil {
		t.Fatal(err)
	}
	// The agent is back: a message sent now arrives, and neither the request nor the
	// cancelled event did before it (the outbox would have retried them first, within 100 ms).
	later := event(t, a.Builder(), agentName(1))
	if err := a.Send(testCtx(t), later); err != nil {
		t.Fatalf("a send once the agent is back: %v", err)
	}
	testsupport.WaitFor(t, 5*time.Second, "the agent reachable again", func() bool { return len(got) > 0 })
	time.Sleep(300 * time.Millisecond) // three retry periods: time for a queued message to go
	for {
		select {
		case id := <-got:
			if id != later.Envelope.MessageID {
				t.Fatalf("the agent got %s, a message its sender gave up on (request %s, cancelled %s)", id, req.Envelope.MessageID, ev.Envelope.MessageID)
			}
			continue
		default:
		}
		break
	}
	events := countEvents(t, a, req.Envelope.MessageID)
	if events[audit.EventCancelled] != 1 {
		t.Fatalf("audit of the given-up request: %v, want one cancelled", events)
	}
}

// countEvents counts the audit log's events about message id.
func countEvents(t *testing.T, n *Node, id string) map[audit.Event]int {
	t.Helper()
	out := map[audit.Event]int{}
	testsupport.WaitFor(t, 5*time.Second, "the audit log written", func() bool {
		clear(out)
		_ = audit.Tail(testCtx(t), n.Config().DataDir+"/audit", 0, false, func(e audit.Entry) error {
			if e.MessageID == id {
				out[e.Event]++
			}
			return nil
		})
		return len(out) > 0
	})
	return out
}
