package discovery

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMesh100 builds a 100-node mocknet mesh joined through 2 bootstrap peers, publishes an
// agent on every node and reports:
//   - join_ms: from Start until every node joined and every agent was published;
//   - resolve_all_ms and resolve_success_%: every agent resolved from every node (10,000 cold
//     lookups, cache off during this phase);
//   - cap_cold_p50_ms / cap_cold_p99_ms: FindByCapability on a node that has cached nothing
//     for that capability (a DHT walk for providers and one per provider record);
//   - cap_warm_p50_ms / cap_warm_p99_ms: the same lookup repeated within the cache TTL;
//   - cap_success_%: lookups that returned exactly the expected agents.
//
// Run it once: go test -run '^$' -bench Mesh100 -benchtime 1x ./discovery/
func BenchmarkMesh100(b *testing.B) {
	for range b.N {
		benchMesh(b, 100)
	}
}

func benchMesh(b *testing.B, n int) {
	m := newMesh(b, n, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t0 := time.Now()
	m.waitJoined(b)
	m.publishAll(b, ctx)
	join := time.Since(t0)

	// every agent from every node, bypassing the cache.
	var ok, total atomic.Int64
	t0 = time.Now()
	m.parallel(b, 8, n, func(from int) error {
		for to := range n {
			total.Add(1)
			if _, err := m.ds[from].getRecord(ctx, AgentKey(agentID(to))); err == nil {
				ok.Add(1)
			}
		}
		return nil
	})
	resolveAll := time.Since(t0)

	// capability lookups: llama3 (every 4th agent) and security (every 5th), cold then warm.
	want := map[string]int{"llama3": (n + 3) / 4, "security": (n + 4) / 5}
	kinds := map[string]string{"llama3": KindModel, "security": KindDomain}
	var mu sync.Mutex
	var cold, warm []time.Duration
	var capOK, capTotal int
	m.parallel(b, 4, n, func(from int) error {
		for _, name := range []string{"llama3", "security"} {
			for pass := range 6 {
				t := time.Now()
				recs, err := m.ds[from].FindByCapability(ctx, kinds[name], name)
				d := time.Since(t)
				mu.Lock()
				if pass == 0 {
					cold = append(cold, d)
				} else {
					warm = append(warm, d)
				}
				capTotal++
				if err == nil && len(recs) == want[name] {
					capOK++
				}
				mu.Unlock()
			}
		}
		return nil
	})
	b.ReportMetric(float64(join.Milliseconds()), "join_ms")
	b.ReportMetric(float64(resolveAll.Milliseconds()), "resolve_all_ms")
	b.ReportMetric(100*float64(ok.Load())/float64(total.Load()), "resolve_success_%")
	b.ReportMetric(ms(pct(cold, 50)), "cap_cold_p50_ms")
	b.ReportMetric(ms(pct(cold, 99)), "cap_cold_p99_ms")
	b.ReportMetric(ms(pct(warm, 50)), "cap_warm_p50_ms")
	b.ReportMetric(ms(pct(warm, 99)), "cap_warm_p99_ms")
	b.ReportMetric(100*float64(capOK)/float64(capTotal), "cap_success_%")
	m.close()
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
