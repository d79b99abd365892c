package pubsub

import (
	"math"
	"testing"
	"time"
)

// The score counters fade over the durations docs/gossip.md gives, at the decay tick we run
// (10 s, not gossipsub's second): each factor, applied once a tick for that long, leaves
// DecayToZero.
func TestScoreParams_CountersFadeOverTheirDurationsAtOurTick(t *testing.T) {
	sp, tp := scoreParams(), topicScoreParams()
	if sp.DecayInterval != scoreDecayInterval || scoreDecayInterval != 10*time.Second {
		t.Fatalf("decay tick %s, want 10 s", sp.DecayInterval)
	}
	for _, c := range []struct {
		name   string
		factor float64
		over   time.Duration
	}{
		{"behaviour penalty (P7)", sp.BehaviourPenaltyDecay, 10 * time.Minute},
		{"first deliveries (P2)", tp.FirstMessageDeliveriesDecay, 10 * time.Minute},
		{"invalid messages (P4)", tp.InvalidMessageDeliveriesDecay, time.Hour},
	} {
		ticks := float64(c.over / sp.DecayInterval)
		if got := math.Pow(c.factor, ticks); math.Abs(got-sp.DecayToZero) > 1e-9 {
			t.Errorf("%s: %v a tick leaves %v after %s, want %v", c.name, c.factor, got, c.over, sp.DecayToZero)
		}
	}
}
