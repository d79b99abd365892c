package coord

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// direct sends one plain request through the node, as an agent would without coord.
func direct(ctx context.Context, b *testing.B, c *Coordinator, to string) time.Duration {
	start := time.Now()
	m, err := c.n.Builder().Request(to, query.Intent, query.Payload)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.n.Request(ctx, m); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkScatter10 scatters one query to 10 agents on a mocknet mesh (completion all) and,
// in the same iteration, asks each of them directly one after the other: the metric
// scatter/slowest is the scatter's time over the slowest of the ten direct round trips
// (at most 1.5). scatter/by-hand compares it with the same ten requests sent
// at once by ten goroutines without coord: what coord itself adds. On one machine the ten
// recipients share its cores (their signature checks, their store commits), which the slowest
// single round trip does not pay; docs/coordination.md reports the numbers.
func BenchmarkScatter10(b *testing.B) {
	b.Run("durable", func(b *testing.B) { benchScatter(b, rigOpts{}) })
	b.Run("in-memory", func(b *testing.B) {
		benchScatter(b, rigOpts{node: []node.Option{node.WithDurable(false), node.WithAudit(false, false)}})
	})
}

func benchScatter(b *testing.B, o rigOpts) {
	r := newRig(b, 11, o)
	c := r.coordinator(b)
	ctx := testCtx(b, 10*time.Minute)
	targets := Targets{Agents: agents(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)}
	var scatter, slowest, byHand time.Duration
	b.ResetTimer()
	for b.Loop() {
		var worst time.Duration
		for _, id := range targets.Agents {
			worst = max(worst, direct(ctx, b, c, id))
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, id := range targets.Agents {
			wg.Go(func() { direct(ctx, b, c, id) })
		}
		wg.Wait()
		byHand += time.Since(start)
		start = time.Now()
		g, err := c.Scatter(ctx, targets, query, ScatterOptions{})
		if err != nil || len(g.Answers) != 10 {
			b.Fatalf("%v, %d answers", err, len(g.Answers))
		}
		scatter += time.Since(start)
		slowest += worst
	}
	b.ReportMetric(float64(scatter)/float64(slowest), "scatter/slowest")
	b.ReportMetric(float64(scatter)/float64(byHand), "scatter/by-hand")
	b.ReportMetric(float64(slowest.Microseconds())/float64(b.N), "slowest-µs/op")
}

// BenchmarkAnyOf asks any-of over 3 agents and, in the same iteration, one of them directly:
// the metric anyof/direct is the ratio of their times (at most 1.10).
func BenchmarkAnyOf(b *testing.B) {
	r := newRig(b, 4, rigOpts{})
	c := r.coordinator(b)
	ctx := testCtx(b, 10*time.Minute)
	var any, dir time.Duration
	cp := Capability{"tool", "terminal"}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		dir += direct(ctx, b, c, agentName(1+i%3))
		start := time.Now()
		if _, err := c.AnyOf(ctx, cp, query, CallOptions{}); err != nil {
			b.Fatal(err)
		}
		any += time.Since(start)
	}
	b.ReportMetric(float64(any)/float64(dir), "anyof/direct")
	_ = protocol.IntentQuery
}
