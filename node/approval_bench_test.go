package node

import (
	"context"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// BenchmarkApprovalRTT is what holding costs a request that requires approval, beside a plain
// durable round trip in the same run: the request is held (one store commit), approved at once
// when its held event comes (the store marks it, another commit), sent through the outbox and
// answered, and released (a third). The human's own time is, of course, not in it.
func BenchmarkApprovalRTT(b *testing.B) {
	a, _, _ := benchPair(b)
	ctx := context.Background()
	payload := payload1K()
	approved := func() time.Duration {
		_, after, changed := a.Approvals().Events(^uint64(0))
		t0 := time.Now() // as roundTrip's: from before the build
		req, err := a.Builder().Request("bench:host:b", protocol.IntentHandoff, payload, needsApproval)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := a.Request(ctx, req); done <- err }()
		for held := false; !held; {
			<-changed
			var es []ApprovalEvent
			es, after, changed = a.Approvals().Events(after)
			for _, e := range es {
				held = held || (e.Kind == ApprovalHeld && e.MessageID == req.Envelope.MessageID)
			}
		}
		if err := a.Approvals().Approve(ctx, req.Envelope.MessageID, "bench"); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 20 {
		roundTrip(b, ctx, a, payload)
		approved()
	}
	var plain, held []time.Duration
	b.ResetTimer()
	for range b.N {
		plain = append(plain, roundTrip(b, ctx, a, payload))
		held = append(held, approved())
	}
	b.StopTimer()
	b.ReportMetric(us(pct(plain, .5)), "plain-p50-µs")
	b.ReportMetric(us(pct(held, .5)), "approved-p50-µs")
	b.ReportMetric(float64(pct(held, .5))/float64(pct(plain, .5)), "approved/plain")
}
