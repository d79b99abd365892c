package api

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// BenchmarkRequestResponse measures one request/response between the same pair of mocknet
// nodes, once through the HTTP binding (POST ?wait, answered by a Go handler on the other
// node) and once through the Go API (node.Request), in the same run. It reports the p50 of
// each and their ratio.
//
//	go test -run '^$' -bench RequestResponse -benchtime 2000x ./api/
func BenchmarkRequestResponse(b *testing.B) {
	// Durable delivery off (its fsync per message would dominate both numbers) and the
	// per-peer rate limit lifted (the loop is faster than the default rate).
	m := newAPIMesh(b, 2, meshOpts{node: func(int) []node.Option { return []node.Option{node.WithDurable(false), node.WithRateLimit(1e6, 1e6)} }})
	m.nodes[1].Handle(protocol.IntentHandoff, func(_ context.Context, r *node.Request) error {
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	ctx := context.Background()
	measure := func(do func() error) []time.Duration {
		ds := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := do(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds
	}
	b.ResetTimer()
	viaHTTP := measure(func() error {
		_, err := m.clients[0].Request(ctx, request(agentName(1), protocol.IntentHandoff, `{}`), 10*time.Second)
		return err
	})
	viaGo := measure(func() error {
		req, err := m.nodes[0].Builder().Request(agentName(1), protocol.IntentHandoff, nil)
		if err != nil {
			return err
		}
		_, err = m.nodes[0].Request(ctx, req)
		return err
	})
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 { return float64(ds[len(ds)/2].Microseconds()) }
	b.ReportMetric(p50(viaHTTP), "http-p50-µs")
	b.ReportMetric(p50(viaGo), "go-p50-µs")
	b.ReportMetric(p50(viaHTTP)/p50(viaGo), "http/go-p50")
	b.ReportMetric(0, "ns/op")
}
