package node

import (
	"context"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// BenchmarkAsk compares, in one run on one mocknet, a broadcast query answered by the 5
// members of a group (Count 5: it ends on the fifth answer) with one direct request to one
// member answered by the same handler. Reported: each one's time per operation and their
// ratio (docs/coordination.md, "Broadcast query").
func BenchmarkAsk(b *testing.B) {
	m := askMesh(b)
	warmAsk(b, m.nodes[0], AskOptions{Group: "summarize", Intent: "x-echo", Count: 5, Deadline: 5 * time.Second})
	ctx := context.Background()
	var ask, direct time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := m.nodes[0].Ask(ctx, AskOptions{Group: "summarize", Intent: "x-echo", Count: 5, Deadline: 10 * time.Second})
		if err != nil || len(res.Answers) != 5 {
			b.Fatalf("ask: %v, %d answers", err, len(res.Answers))
		}
		t1 := time.Now()
		req, _ := m.nodes[0].Builder().Request(agentName(1+i%5), "x-echo", nil)
		if _, err := m.nodes[0].Request(ctx, req); err != nil {
			b.Fatal(err)
		}
		ask, direct = ask+t1.Sub(t0), direct+time.Since(t1)
	}
	b.ReportMetric(float64(ask.Microseconds())/float64(b.N)/1000, "ask-ms/op")
	b.ReportMetric(float64(direct.Microseconds())/float64(b.N)/1000, "request-ms/op")
	b.ReportMetric(float64(ask)/float64(direct), "ask/request")
}

// BenchmarkAskEveryAgent20 asks every agent of a 20-node mocknet (the query answered by each
// node's built-in capability query handler) and waits for the 19 answers.
func BenchmarkAskEveryAgent20(b *testing.B) {
	const n = 20
	m := newMesh(b, n, []Option{WithGossip(true), WithHeartbeatInterval(time.Second)}, nil)
	var res *AskResult
	testsupport.WaitFor(b, 30*time.Second, "every agent answering", func() bool {
		var err error
		res, err = m.nodes[0].Ask(context.Background(), AskOptions{Count: n - 1, Deadline: 3 * time.Second})
		return err == nil && len(res.Answers) == n-1
	})
	var last time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := m.nodes[i%n].Ask(context.Background(), AskOptions{Count: n - 1, Deadline: 10 * time.Second})
		if err != nil || len(res.Answers) != n-1 {
			b.Fatalf("ask from %d: %v, %d answers, errors %+v, ended %s, refused %d; answered %v", i%n, err, len(res.Answers), res.Errors, res.Ended, res.Refused, answerers(res))
		}
		for _, a := range res.Answers {
			last = max(last, a.Latency)
		}
	}
	b.ReportMetric(float64(last.Microseconds())/1000, "slowest-answer-ms")
}
