package a2abridge

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/node"
)

// BenchmarkBridgeRequest measures a request through the A2A bridge against the same request
// over IACP: an A2A message/send through the inbound bridge (a2a-go's client, JSON-RPC over
// loopback HTTP, the bridge's task machinery, then the node's local API) and a request through
// the local API itself (apiclient.Client.Request), both answered by a Go handler on the other
// mocknet node, alternating one of each per iteration. It reports the p50 of each and their
// ratio, a2a/iacp-p50: what the bridge adds.
//
//	go test -run '^$' -bench BridgeRequest -benchtime 2000x ./a2abridge/
func BenchmarkBridgeRequest(b *testing.B) {
	// Durable delivery off (its fsync per message would dominate both numbers) and the
	// per-peer rate limit lifted (the loop is faster than the default rate).
	m := mesh(b, 7470, node.WithDurable(false), node.WithRateLimit(1e6, 1e6))
	hs, hc := bridge(b, m)
	cl, _ := client(b, hc, agentURL(hs.URL, summariser), a2a.TransportProtocolJSONRPC)
	ctx := context.Background()
	viaA2A := func() error {
		res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("t"))})
		if t, ok := res.(*a2a.Task); err == nil && (!ok || t.Status.State != a2a.TaskStateCompleted) {
			b.Fatalf("the bridge answered %#v", res)
		}
		return err
	}
	viaAPI := func() error {
		req := &apiclient.Message{}
		req.Envelope.Recipient.AgentID = summariser
		req.Message.Type, req.Message.Intent, req.Message.Payload = apiclient.TypeRequest, "handoff", []byte(`{"text":"t"}`)
		_, err := m[0].c.Request(ctx, req, 10*time.Second)
		return err
	}
	for range 20 { // warm both paths: connections, the DHT lookup of the summariser
		if viaA2A() != nil || viaAPI() != nil {
			b.Fatal("warm-up failed")
		}
	}
	a2aTimes, apiTimes := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	timed := func(do func() error, into *[]time.Duration) {
		start := time.Now()
		if err := do(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 { // alternate which goes first
			timed(viaA2A, &a2aTimes)
			timed(viaAPI, &apiTimes)
		} else {
			timed(viaAPI, &apiTimes)
			timed(viaA2A, &a2aTimes)
		}
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds())
	}
	a, i := p50(a2aTimes), p50(apiTimes)
	b.ReportMetric(a, "a2a-p50-µs")
	b.ReportMetric(i, "iacp-p50-µs")
	b.ReportMetric(a/i, "a2a/iacp-p50")
	b.ReportMetric(0, "ns/op")
}
