package pubsub

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Tick skips its visit of the rows while none can be due. A table that skips and one that
// visits every row at every tick go through the same random history (beats of every status
// and interval, beats out of order, taken-over agent ids, lost connections, watches, refused
// probes, probes due, late ticks that raise the health multiplier, a full table) and must
// make the same transitions at the same ticks.
func TestTick_SkippingVisitsChangesNoTransition(t *testing.T) {
	statuses := []string{"alive", "busy", "draining", "offline"}
	intervals := []time.Duration{0, time.Second, 2 * time.Second, 5 * time.Second, 30 * time.Second}
	for run := range 200 {
		rng := rand.New(rand.NewPCG(uint64(run), 18))
		cfg := LivenessConfig{Interval: time.Second, SuspectAfter: 3, StuckAfter: 20 * time.Second,
			ForgetAfter: time.Minute, MaxAgents: 10, MaxWatched: 3}
		skip, full := NewLiveness(cfg), NewLiveness(cfg)
		now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		peers := make([]peer.ID, 14)
		for i := range peers {
			peers[i] = peer.ID(fmt.Sprintf("peer-%02d", i))
		}
		seq := 0
		for step := range 600 {
			now = now.Add(time.Duration(1+rng.IntN(900)) * time.Millisecond) // strictly later: no ties between watches (map order)
			i := rng.IntN(len(peers))
			agent, pid := fmt.Sprintf("a:h:%02d", i), peers[i]
			if rng.IntN(20) == 0 {
				pid = peers[rng.IntN(len(peers))] // another peer claims the id
			}
			both := func(f func(l *Liveness) any) {
				t.Helper()
				if a, b := f(skip), f(full); !reflect.DeepEqual(a, b) {
					t.Fatalf("run %d step %d: skipping %v, visiting %v", run, step, a, b)
				}
			}
			switch rng.IntN(12) {
			case 0, 1, 2, 3, 4:
				seq++
				h := Heard{AgentID: agent, PeerID: pid, Interval: intervals[rng.IntN(len(intervals))],
					Sent: now.Add(-time.Duration(rng.IntN(3000)) * time.Millisecond), MessageID: fmt.Sprintf("%08d", seq)}
				h.Payload.Status = statuses[rng.IntN(len(statuses))]
				both(func(l *Liveness) any { trs, ok := l.Observe(h, now); return fmt.Sprint(trs, ok) })
			case 5:
				both(func(l *Liveness) any { l.Disconnected(pid); return nil })
			case 6, 7:
				both(func(l *Liveness) any { l.Watch(agent, pid, now); return nil })
			case 8:
				both(func(l *Liveness) any { l.Unprobeable(agent, now); return nil })
			case 9:
				both(func(l *Liveness) any { return fmt.Sprint(len(l.Due(now, 16))) })
			case 10:
				late := time.Duration(rng.IntN(3)) * 400 * time.Millisecond
				both(func(l *Liveness) any { l.Ticked(now.Add(-late), now); return l.Health() })
			}
			full.next = time.Time{}
			both(func(l *Liveness) any { return l.Tick(now) })
		}
		if !reflect.DeepEqual(skip.Agents(), full.Agents()) {
			t.Fatalf("run %d: the tables differ at the end", run)
		}
	}
}
