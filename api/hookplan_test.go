package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// The plan is tested as the pure schedule it is: an inbox listing and a time in, what to post
// out. t0 is its clock's start; messages live for an hour unless said otherwise.
var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func delivery(seq uint64, ttl time.Duration) node.Delivery {
	m := &protocol.Message{}
	m.Envelope.MessageID = fmt.Sprintf("msg-%d", seq)
	m.Envelope.Timestamp = t0.Format(time.RFC3339Nano)
	m.Envelope.TTLSeconds = int64(ttl / time.Second)
	return node.Delivery{Seq: seq, Received: t0, Msg: m}
}

func ids(ds []node.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Msg.Envelope.MessageID)
	}
	return out
}

// noJitter draws the top of the range: the longest wait.
func noJitter(n int64) int64 { return n - 1 }

func TestHookPlan_AFailingMessageNeverHoldsUpTheOthers(t *testing.T) {
	p := newHookPlan(time.Second, time.Minute, 1, noJitter)
	inbox := []node.Delivery{delivery(1, time.Hour), delivery(2, time.Hour), delivery(3, time.Hour)}
	w := p.next(inbox, t0)
	if got := ids(w.post); len(got) != 1 || got[0] != "msg-1" {
		t.Fatalf("one slot: posted %v, want the oldest", got)
	}
	p.done("msg-1", false, t0)
	// msg-1 waits its backoff; the others go first, one at a time.
	for _, want := range []string{"msg-2", "msg-3"} {
		w = p.next(inbox, t0)
		if got := ids(w.post); len(got) != 1 || got[0] != want {
			t.Fatalf("posted %v, want %s while msg-1 backs off", got, want)
		}
		p.done(want, true, t0)
		inbox = append(inbox[:1], inbox[2:]...) // the agent took it: it left the inbox
	}
	if w = p.next(inbox, t0.Add(time.Second)); len(w.post) != 1 || w.post[0].Msg.Envelope.MessageID != "msg-1" {
		t.Fatalf("after its backoff msg-1 is posted again; got %v", ids(w.post))
	}
}

func TestHookPlan_RetriesWithoutLimitUntilTaken(t *testing.T) {
	p := newHookPlan(100*time.Millisecond, 30*time.Second, 4, noJitter)
	inbox := []node.Delivery{delivery(1, 24*time.Hour)}
	now := t0
	for attempt := 1; attempt <= 1000; attempt++ {
		w := p.next(inbox, now)
		if len(w.post) != 1 {
			t.Fatalf("attempt %d: nothing posted at %s (wake %s)", attempt, now, w.wake)
		}
		n, wait := p.done("msg-1", false, now)
		if n != attempt || wait < 100*time.Millisecond || wait > 30*time.Second {
			t.Fatalf("failure %d: counted %d, wait %s; want within [100ms, 30s]", attempt, n, wait)
		}
		if w := p.next(inbox, now); len(w.post) != 0 || !w.wake.Equal(now.Add(wait)) {
			t.Fatalf("failure %d: posted again before the backoff (wake %s)", attempt, w.wake)
		}
		now = now.Add(wait)
	}
	p.next(inbox, now)
	p.done("msg-1", true, now)
	if w := p.next(inbox[:0], now); len(p.sched) != 0 || len(w.post) != 0 {
		t.Fatalf("a taken message is still scheduled: %v", p.sched)
	}
}

func TestHookPlan_BoundedConcurrency(t *testing.T) {
	p := newHookPlan(time.Second, time.Minute, 4, noJitter)
	var inbox []node.Delivery
	for i := uint64(1); i <= 10; i++ {
		inbox = append(inbox, delivery(i, time.Hour))
	}
	if w := p.next(inbox, t0); len(w.post) != 4 {
		t.Fatalf("posted %d at once, the limit is 4", len(w.post))
	}
	if w := p.next(inbox, t0); len(w.post) != 0 {
		t.Fatalf("posted %d more with every slot taken", len(w.post))
	}
	p.done("msg-2", true, t0)
	inbox = append(inbox[:1], inbox[2:]...) // the agent took msg-2
	if w := p.next(inbox, t0); len(w.post) != 1 || w.post[0].Msg.Envelope.MessageID != "msg-5" {
		t.Fatalf("a freed slot posted %v, want msg-5", ids(w.post))
	}
}

func TestHookPlan_ForgetsWhatLeftTheInbox(t *testing.T) {
	p := newHookPlan(time.Second, time.Minute, 4, noJitter)
	inbox := []node.Delivery{delivery(1, time.Hour), delivery(2, time.Hour)}
	p.next(inbox, t0)
	p.done("msg-1", false, t0)
	p.done("msg-2", false, t0)
	// Another consumer took msg-1 (an ack through the API or a WebSocket).
	w := p.next(inbox[1:], t0)
	if _, ok := p.sched["msg-1"]; ok || len(p.sched) != 1 || len(w.post) != 0 {
		t.Fatalf("schedules %v; want only msg-2's, and nothing posted before its backoff", p.sched)
	}
	// A message taken while its post is in flight is forgotten once the post ends.
	p.next(inbox[1:], t0.Add(time.Hour/2))
	p.next(nil, t0.Add(time.Hour/2))
	p.done("msg-2", false, t0.Add(time.Hour/2))
	p.next(nil, t0.Add(time.Hour/2))
	if len(p.sched) != 0 || p.inflight != 0 {
		t.Fatalf("schedules %v, %d in flight; want none", p.sched, p.inflight)
	}
}

func TestHookPlan_ExpiredMessagesAreAcknowledgedNotPosted(t *testing.T) {
	p := newHookPlan(time.Minute, time.Hour, 4, noJitter)
	inbox := []node.Delivery{delivery(1, 10*time.Second), delivery(2, time.Hour)}
	w := p.next(inbox, t0)
	p.done("msg-1", false, t0)
	p.done("msg-2", false, t0)
	// msg-1 expires before its next post: the plan wakes the loop at its expiry.
	w = p.next(inbox, t0)
	if want := t0.Add(10 * time.Second); !w.wake.Equal(want) {
		t.Fatalf("wake %s, want msg-1's expiry %s", w.wake, want)
	}
	w = p.next(inbox, t0.Add(10*time.Second))
	if got := ids(w.expired); len(got) != 1 || got[0] != "msg-1" || len(w.post) != 0 {
		t.Fatalf("expired %v, posted %v; want msg-1 expired, nothing posted", got, ids(w.post))
	}
	if _, ok := p.sched["msg-1"]; ok {
		t.Fatal("an expired message keeps its schedule")
	}
}

// The waits a failing message gets lie between the webhook's minimum and maximum backoff:
// the first is the minimum, late ones are near the cap, and a very late one is the cap.
func TestHookPlan_WaitsBetweenMinAndMax(t *testing.T) {
	lo, hi := 100*time.Millisecond, 2*time.Second
	fail := func(p *hookPlan, now time.Time, after int) time.Duration {
		t.Helper()
		if w := p.next([]node.Delivery{delivery(1, 24*time.Hour)}, now); len(w.post) != 1 {
			t.Fatalf("nothing posted at %s", now)
		}
		p.sched["msg-1"].attempts = after
		_, wait := p.done("msg-1", false, now)
		return wait
	}
	for _, rnd := range []func(int64) int64{func(int64) int64 { return 0 }, noJitter} {
		p := newHookPlan(lo, hi, 1, rnd)
		now := t0
		for a := 0; a < 200; a++ {
			wait := fail(p, now, a)
			if wait < lo || wait > hi {
				t.Fatalf("failure %d: %s outside [%s, %s]", a+1, wait, lo, hi)
			}
			if a == 0 && wait != lo {
				t.Fatalf("first failure: %s, want the minimum %s", wait, lo)
			}
			now = now.Add(wait)
		}
	}
	if d := fail(newHookPlan(lo, hi, 1, func(int64) int64 { return 0 }), t0, 29); d < hi/2 {
		t.Fatalf("late attempts wait near the cap; got %s", d)
	}
	if d := fail(newHookPlan(time.Second, 24*time.Hour, 1, noJitter), t0, 1<<20); d != 24*time.Hour {
		t.Fatalf("a very late attempt waits the cap; got %s", d)
	}
}
