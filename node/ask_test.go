package node

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// askMesh: node 0 asks; nodes 1..5 have the capability "summarize" (the group); node 6 has
// not, and has no inbox. Every node but 0 answers x-echo with its agent id; node 5 never answers x-slow.
func askMesh(t testing.TB) *mesh {
	m := newMesh(t, 7, []Option{WithGossip(true), WithHeartbeatInterval(time.Second), WithInbox(true)},
		func(i int, _ *mesh) []Option {
			switch {
			case i >= 1 && i <= 5:
				return []Option{WithAgent(agentName(i), protocol.Manifest{Tools: []string{"summarize"}})}
			case i == 6:
				return []Option{WithInbox(false)}
			}
			return nil
		})
	for i, nd := range m.nodes[1:] {
		i := i + 1
		nd.Handle("x-echo", func(_ context.Context, r *Request) error {
			return r.Reply(protocol.ResponseAccepted, map[string]any{"me": agentName(i)})
		})
		nd.Handle("x-slow", func(_ context.Context, r *Request) error {
			if i == 5 {
				return nil // takes the query and never answers
			}
			return r.Reply(protocol.ResponseAccepted, map[string]any{"me": agentName(i)})
		})
	}
	return m
}

func members() []string {
	return []string{agentName(1), agentName(2), agentName(3), agentName(4), agentName(5)}
}

// warmAsk asks until every member answers: gossip needs a moment to learn who is in the
// group. It returns the last result.
func warmAsk(t testing.TB, asker *Node, o AskOptions) *AskResult {
	t.Helper()
	var res *AskResult
	testsupport.WaitFor(t, 20*time.Second, "all 5 members answering the query", func() bool {
		var err error
		res, err = asker.Ask(context.Background(), o)
		if err != nil {
			t.Logf("ask: %v", err)
			return false
		}
		return len(res.Answers) == 5
	})
	return res
}

func answerers(res *AskResult) []string {
	var out []string
	for _, a := range res.Answers {
		out = append(out, a.AgentID)
	}
	slices.Sort(out)
	return out
}

// A query to a group of 5 with a count of 5 collects the 5 answers, each with its member's
// own content, and ends on the count, not the deadline; the non-member does not answer. A
// member that never answers is reported missing when the deadline passes.
func TestAsk_GroupCollectsEveryMemberAndReportsTheSilent(t *testing.T) {
	m := askMesh(t)
	res := warmAsk(t, m.nodes[0], AskOptions{Group: "summarize", Intent: "x-echo", Count: 5, Deadline: 10 * time.Second})
	if res.Ended != "count" {
		t.Fatalf("ended %q, want count (all 5 answered before the deadline)", res.Ended)
	}
	if got := answerers(res); !slices.Equal(got, members()) {
		t.Fatalf("answers from %v, want the members %v", got, members())
	}
	for _, a := range res.Answers {
		var body struct{ Me, Status string }
		if err := json.Unmarshal(a.Payload, &body); err != nil || body.Me != a.AgentID || a.Status != protocol.ResponseAccepted {
			t.Fatalf("answer of %s carries %s (status %q)", a.AgentID, a.Payload, a.Status)
		}
		if a.Latency <= 0 || a.Message.Envelope.CorrelationID != res.QueryID {
			t.Fatalf("answer of %s: latency %v, correlation %s (query %s)", a.AgentID, a.Latency, a.Message.Envelope.CorrelationID, res.QueryID)
		}
	}
	// Expected members: the query ends when all answered, or at the deadline with the silent
	// one missing.
	res, err := m.nodes[0].Ask(testCtx(t), AskOptions{Group: "summarize", Intent: "x-slow", Expect: members(), Deadline: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended != "deadline" || !slices.Equal(res.Missing, []string{agentName(5)}) || len(res.Answers) != 4 {
		t.Fatalf("ended %q, missing %v, %d answers; want deadline, [%s], 4", res.Ended, res.Missing, len(res.Answers), agentName(5))
	}
	res, err = m.nodes[0].Ask(testCtx(t), AskOptions{Group: "summarize", Intent: "x-echo", Expect: members(), Deadline: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended != "expected" || len(res.Missing) != 0 {
		t.Fatalf("ended %q, missing %v; want expected, none", res.Ended, res.Missing)
	}
}

// A query to every agent reaches the non-member too, and reports the live agents that did not
// answer; an agent with no handler and no inbox
// for the intent answers with its error, reported by agent.
func TestAsk_EveryAgentAndErrorsByAgent(t *testing.T) {
	m := askMesh(t)
	var res *AskResult
	testsupport.WaitFor(t, 20*time.Second, "all 6 agents answering the query to every agent", func() bool {
		var err error
		res, err = m.nodes[0].Ask(context.Background(), AskOptions{Intent: "x-echo", Count: 6, Deadline: 3 * time.Second})
		return err == nil && len(res.Answers) == 6
	})
	if !slices.Contains(answerers(res), agentName(6)) {
		t.Fatalf("answers from %v: the non-member is an agent too", answerers(res))
	}
	// Without Expect, a query to every agent expects the live agents of the liveness table:
	// node 5, silent on x-slow, is reported missing.
	testsupport.WaitFor(t, 20*time.Second, "the 6 other agents alive in the liveness table", func() bool {
		alive := 0
		for _, st := range m.nodes[0].Agents() {
			if st.AgentID != agentName(0) && st.State == StateAlive {
				alive++
			}
		}
		return alive == 6
	})
	res, err := m.nodes[0].Ask(testCtx(t), AskOptions{Intent: "x-slow", Deadline: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended != "deadline" || len(res.Answers) != 5 || !slices.Equal(res.Missing, []string{agentName(5)}) {
		t.Fatalf("ended %q, answers %v, missing %v; want deadline, 5, [%s]", res.Ended, answerers(res), res.Missing, agentName(5))
	}
	// No node has an x-none handler: the members take it into their inboxes, node 6 has
	// none and answers CAPABILITY_MISMATCH.
	res, err = m.nodes[0].Ask(testCtx(t), AskOptions{Intent: "x-none", Expect: []string{agentName(6)}, Deadline: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended != "expected" || len(res.Answers) != 0 || len(res.Errors) != 1 ||
		res.Errors[0].AgentID != agentName(6) || res.Errors[0].Code != protocol.CodeCapabilityMismatch {
		t.Fatalf("ended %q, answers %v, errors %+v; want node 6's CAPABILITY_MISMATCH", res.Ended, answerers(res), res.Errors)
	}
}

// Only a verified answer correlated to the query is collected: one whose signature fails is
// refused, one correlated to another message is an ordinary message (the inbox), and an
// answer that comes after the query closed is receipted and dropped.
func TestAsk_ForgedAndLateAnswersAreNotCollected(t *testing.T) {
	m := askMesh(t)
	warmAsk(t, m.nodes[0], AskOptions{Group: "summarize", Intent: "x-echo", Count: 5, Deadline: 5 * time.Second})
	forged := make(chan error, 2)
	m.nodes[1].Handle("x-forge", func(ctx context.Context, r *Request) error {
		bad, _ := m.nodes[1].Builder().Response(r.Msg, protocol.ResponseAccepted, map[string]any{"me": "signed"})
		bad.Message.Payload = json.RawMessage(`{"status":"accepted","me":"forged"}`) // after signing
		forged <- m.nodes[1].Send(ctx, bad)
		other, _ := m.nodes[1].Builder().Response(r.Msg, protocol.ResponseAccepted, map[string]any{"me": "elsewhere"},
			protocol.WithCorrelation("0190f000-0000-7000-8000-000000000001"))
		forged <- m.nodes[1].Send(ctx, other)
		return r.Reply(protocol.ResponseAccepted, map[string]any{"me": "genuine"})
	})
	res, err := m.nodes[0].Ask(testCtx(t), AskOptions{Group: "summarize", Intent: "x-forge", Expect: []string{agentName(1)}, Deadline: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := recv(t, forged); protocol.CodeOf(err) != protocol.CodeIdentityInvalid {
		t.Fatalf("answer with a broken signature: %v, want IDENTITY_INVALID", err)
	}
	if err := recv(t, forged); err != nil {
		t.Fatalf("uncorrelated answer: %v", err)
	}
	if len(res.Answers) != 1 || res.Answers[0].AgentID != agentName(1) || res.Refused != 0 {
		t.Fatalf("answers %v, refused %d; want agent 1's only", answerers(res), res.Refused)
	}
	var body struct{ Me string }
	if err := json.Unmarshal(res.Answers[0].Payload, &body); err != nil || body.Me != "genuine" {
		t.Fatalf("collected %s, want the genuine answer", res.Answers[0].Payload)
	}
	inbox := func(correlation string) int {
		k := 0
		for _, d := range m.nodes[0].Inbox().List(0) {
			if d.Msg.Envelope.CorrelationID == correlation {
				k++
			}
		}
		return k
	}
	if inbox("0190f000-0000-7000-8000-000000000001") != 1 {
		t.Fatal("the uncorrelated answer did not reach the inbox as an ordinary message")
	}

	// Late: node 2 takes the query and answers once the query closed.
	queries := make(chan *protocol.Message, 1)
	m.nodes[2].Handle("x-late", func(_ context.Context, r *Request) error {
		queries <- r.Msg
		return nil
	})
	res, err = m.nodes[0].Ask(testCtx(t), AskOptions{Group: "summarize", Intent: "x-late", Expect: []string{agentName(2)}, Deadline: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Missing, []string{agentName(2)}) {
		t.Fatalf("missing %v, want agent 2", res.Missing)
	}
	q := recv(t, queries)
	late, _ := m.nodes[2].Builder().Response(q, protocol.ResponseAccepted, map[string]any{"me": "late"}, protocol.WithTTL(time.Minute))
	if err := m.nodes[2].Send(testCtx(t), late); err != nil {
		t.Fatalf("late answer: %v, want a receipt", err)
	}
	if k := inbox(res.QueryID); k != 0 {
		t.Fatalf("the late answer reached the asker's inbox (%d)", k)
	}
}

// The book bounds the queries open at once and keeps one answer per agent.
func TestAskBook_Bounds(t *testing.T) {
	var b askBook
	for i := range MaxAsks {
		if err := b.openAsk(string(rune('a'+i%26))+strconv.Itoa(i), &ask{done: make(chan struct{}), expect: map[string]bool{}, answered: map[string]bool{}, count: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.openAsk("one-more", &ask{}); protocol.CodeOf(err) != protocol.CodeRateLimited {
		t.Fatalf("query %d: %v, want RATE_LIMITED", MaxAsks+1, err)
	}
	id := "a" + strconv.Itoa(0)
	ans := func(agent string) *protocol.Message {
		msg := &protocol.Message{}
		msg.Envelope.CorrelationID, msg.Envelope.Sender.AgentID = id, agent
		msg.Message.Type, msg.Message.Payload = protocol.TypeResponse, json.RawMessage(`{"status":"accepted"}`)
		return msg
	}
	now := time.Now()
	for _, agent := range []string{"x", "x", "y", "z"} {
		if !b.offer(ans(agent), "", now) {
			t.Fatalf("answer of %s not taken", agent)
		}
	}
	res := b.result(id, "deadline")
	if len(res.Answers) != 2 || res.Refused != 2 || res.Ended != "count" {
		t.Fatalf("%d answers, %d refused, ended %q; want 2, 2 (a second x, then z over the count), count", len(res.Answers), res.Refused, res.Ended)
	}
	b.closeAsk(id, now.Add(time.Minute))
	if !b.offer(ans("w"), "", now) || b.offer(ans("w"), "", now.Add(2*time.Minute)) {
		t.Fatal("a late answer is dropped while its query is remembered, and left to the node after")
	}
}

// recv takes one value from ch, or fails the test after 10 s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came within 10s")
		panic("unreachable")
	}
}

// Answers to a query are charged to the answering peer's message rate like any unsolicited
// message: a member that floods the asker with answers is refused RATE_LIMITED, and only its
// first answer is collected.
func TestAsk_AnswersAreChargedToThePeersRate(t *testing.T) {
	m := newMesh(t, 2, []Option{WithGossip(true), WithHeartbeatInterval(time.Second)}, func(i int, _ *mesh) []Option {
		if i == 0 {
			return []Option{WithRateLimit(0.01, 3)}
		}
		return []Option{WithAgent(agentName(1), protocol.Manifest{Tools: []string{"summarize"}}), WithDurable(false)}
	})
	m.nodes[1].Handle("x-echo", func(_ context.Context, r *Request) error { return r.Reply(protocol.ResponseAccepted, nil) })
	testsupport.WaitFor(t, 20*time.Second, "the member answering", func() bool {
		res, err := m.nodes[0].Ask(context.Background(), AskOptions{Group: "summarize", Intent: "x-echo", Count: 1, Deadline: 2 * time.Second})
		return err == nil && len(res.Answers) == 1
	})
	sent := make(chan []error, 1)
	m.nodes[1].Handle("x-flood", func(ctx context.Context, r *Request) error {
		var errs []error
		for k := range 10 {
			resp, _ := m.nodes[1].Builder().Response(r.Msg, protocol.ResponseAccepted, map[string]any{"k": k})
			errs = append(errs, m.nodes[1].Send(ctx, resp))
		}
		sent <- errs
		return nil
	})
	res, err := m.nodes[0].Ask(testCtx(t), AskOptions{Group: "summarize", Intent: "x-flood", Deadline: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	limited, errs := 0, recv(t, sent)
	for _, err := range errs {
		if protocol.CodeOf(err) == protocol.CodeRateLimited {
			limited++
		}
	}
	if limited == 0 || len(res.Answers) != 1 || res.Refused > 2 {
		t.Fatalf("%d of 10 answers refused RATE_LIMITED, %d collected, %d dropped; want some refused, 1 collected, at most 2 dropped (burst 3); sends returned %v", limited, len(res.Answers), res.Refused, errs)
	}
}

// Group requests are charged to their author's message rate on every member before they
// reach its agent: a peer publishing many gets no more to the agent than its burst.
func TestAsk_GroupRequestsAreChargedToTheAuthorsRate(t *testing.T) {
	m := newMesh(t, 2, []Option{WithGossip(true), WithHeartbeatInterval(time.Second)}, func(i int, _ *mesh) []Option {
		if i == 1 {
			return []Option{WithAgent(agentName(1), protocol.Manifest{Tools: []string{"summarize"}}), WithRateLimit(0.01, 3)}
		}
		return nil
	})
	var taken atomic.Int64
	m.nodes[1].Handle("x-count", func(context.Context, *Request) error { taken.Add(1); return nil })
	testsupport.WaitFor(t, 20*time.Second, "a first group request reaching the member", func() bool {
		if _, err := m.nodes[0].SendToGroup(testCtx(t), "summarize", "x-count", nil); err != nil {
			t.Logf("send to group: %v", err)
		}
		return taken.Load() > 0
	})
	sub, err := m.nodes[1].Subscribe(EventFilter{Kinds: []EventKind{EventKindGroup}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	for range 20 {
		if _, err := m.nodes[0].SendToGroup(testCtx(t), "summarize", "x-count", nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 { // gossip delivered all 20 to the member's node
		recv(t, sub.C())
	}
	// The node's own subscription hands them over in order, from its own goroutine: give it
	// a moment (a pass without it would let all 20 through, well over the burst).
	time.Sleep(300 * time.Millisecond)
	if got := taken.Load(); got > 3 {
		t.Fatalf("the agent took %d group requests; the author's burst is 3", got)
	}
}
