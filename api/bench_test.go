package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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

// BenchmarkDialectRequestResponse measures what translation adds to a request/response round
// trip: the same request posted with ?wait as an IACP document and as an ElizaOS TASK_REQUEST
// (recognised, mapped to IACP, its answer mapped back to TASK_ACCEPT), in interleaved rounds
// between the same pair of mocknet nodes. Goal: elizaos/iacp-p50 at most 1.10.
//
//	go test -run '^$' -bench DialectRequestResponse -benchtime 2000x ./api/
func BenchmarkDialectRequestResponse(b *testing.B) {
	m := newAPIMesh(b, 2, meshOpts{node: func(int) []node.Option { return []node.Option{node.WithDurable(false), node.WithRateLimit(1e6, 1e6)} }})
	m.nodes[1].Handle(protocol.IntentHandoff, func(_ context.Context, r *node.Request) error {
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	s, hc := m.servers[0], &http.Client{}
	defer hc.CloseIdleConnections()
	post := func(body string) error {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+MessagePath+"?wait=10s", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token())
		req.Header.Set("Content-Type", mediaJSON)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	iacpDoc := `{"envelope":{"recipient":{"agent_id":"` + agentName(1) + `"}},"message":{"type":"request","intent":"handoff","payload":{"task_type":"debug_code"}}}`
	elizaDoc := func() string {
		return `{"mcp_version":"0.1.0","message_id":"` + uuid.NewString() + `","performative":"TASK_REQUEST","sender":{"agent_id":"` +
			agentName(0) + `"},"receiver":{"agent_id":"` + agentName(1) + `"},"reply_with":"task-1","timestamp":"2026-11-23T10:00:00Z","payload":{"task_type":"debug_code"}}`
	}
	const rounds = 10
	var viaIACP, viaEliza []time.Duration
	timed := func(into *[]time.Duration, body string) {
		start := time.Now()
		if err := post(body); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	b.ResetTimer()
	for r := range rounds {
		for i := r * b.N / rounds; i < (r+1)*b.N/rounds; i++ {
			timed(&viaIACP, iacpDoc)
		}
		for i := r * b.N / rounds; i < (r+1)*b.N/rounds; i++ {
			timed(&viaEliza, elizaDoc())
		}
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2].Microseconds())
	}
	if len(viaIACP) == 0 || len(viaEliza) == 0 {
		return // -benchtime below the rounds
	}
	b.ReportMetric(p50(viaIACP), "iacp-p50-µs")
	b.ReportMetric(p50(viaEliza), "elizaos-p50-µs")
	b.ReportMetric(p50(viaEliza)/p50(viaIACP), "elizaos/iacp-p50")
	b.ReportMetric(0, "ns/op")
}
