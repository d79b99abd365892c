package netlab

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// punchTries is how many fresh relayed connections each NAT type gets in the full run, and
// tryFor how long each waits for a hole-punched connection.
const (
	punchTries = 20
	tryFor     = 12 * time.Second
	giveUp     = 8 * time.Second // with a failed punch counted, past the node's repunch
)

// The share of hole punches that succeed, per NAT type (full run only: `make netlab`). Each
// try restarts bob (new ports, so new NAT mappings), has it send to alice through a relay, and
// waits up to tryFor for bob's connection to alice to be a hole-punched one, or giveUp once a
// punch failed (the node's repunch, 5 s in, has had its turn).
func TestNAT_HolePunchShare(t *testing.T) {
	t.Parallel()
	if !*full {
		t.Skip("the hole-punch share is measured by make netlab (-netlab.full); make test punches once, in TestNAT_TwoHomesReachEachOtherThroughARelayThenDirectly")
	}
	for _, nat := range []NAT{Cone, Symmetric} {
		t.Run(nat.String(), func(t *testing.T) {
			t.Parallel()
			m := newMesh(t, nat, nat)
			in := receive(m.alice)
			defer in.close()
			aliceP := m.alice.id()
			ok, first, times := 0, 0, []time.Duration{}
			for i := range punchTries {
				if i > 0 {
					m.bob.stop() // a clean stop closes its connections: alice keeps no stale one
					m.bob.start()
				}
				before := m.alice.peers().NAT
				start := time.Now()
				id := m.bob.send(aliceID, i)
				punched := false
				for !punched && time.Since(start) < tryFor {
					time.Sleep(200 * time.Millisecond)
					punched = m.bob.pathTo(aliceP) == "hole-punched"
					if time.Since(start) > giveUp && m.alice.peers().NAT.Failed > before.Failed {
						break // punches failed, the node's repunch (5 s in) among them
					}
				}
				if punched {
					ok++
					times = append(times, time.Since(start))
				}
				if m.alice.peers().NAT.Succeeded > before.Succeeded && punched {
					first++
				}
				in.waitAll(t, 30*time.Second, []string{id})
			}
			t.Logf("%s NAT: %d of %d tries punched a hole within %v", nat, ok, punchTries, tryFor)
			measuresMu.Lock()
			measures = append(measures, measure{Test: t.Name(), What: fmt.Sprintf("tries that punched a hole within %v (go-libp2p's punch, and the node's repunch)", tryFor),
				Value: fmt.Sprintf("%d of %d (%d %%)", ok, punchTries, 100*ok/punchTries)})
			measures = append(measures, measure{Test: t.Name(), What: "tries whose punches at alice's node succeeded at all",
				Value: fmt.Sprintf("%d of %d", first, punchTries)})
			measuresMu.Unlock()
			if len(times) > 0 {
				slices.Sort(times)
				record(t, "median time from send to a punched connection", times[len(times)/2])
			}
			if nat == Cone && ok == 0 {
				t.Error("no hole punch succeeded through cone NATs")
			}
		})
	}
}
