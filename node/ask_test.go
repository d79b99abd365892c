package node

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// askMesh: node 0 asks; nodes 1..5 have the capability "summarize" (the group); node 6 has
// not, and has no inbox. Every node but 0 answers x-echo with its agent id; node 5 never answers x-slow.
func askMesh(t *testing.T) *mesh {
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
func warmAsk(t *testing.T, asker *Node, o AskOptions) *AskResult {
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

// A query to every agent reaches the non-member too; an agent with no handler and no inbox
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
	// No node has an x-none handler: the members take it into their inboxes, node 6 has
	// none and answers CAPABILITY_MISMATCH.
	res, err := m.nodes[0].Ask(testCtx(t), AskOptions{Intent: "x-none", Expect: []string{agentName(6)}, Deadline: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended != "expected" || len(res.Answers) != 0 || len(res.Errors) != 1 ||
		res.Errors[0].AgentID != agentName(6) || res.Errors[0].Code != protocol.CodeCapabilityMismatch {
		t.Fatalf("ended %q, answers %v, errors %+v; want node 6's CAPABILITY_MISMATCH", res.Ended, answerers(res), res.Errors)
	}
}
