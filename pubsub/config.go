package pubsub

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// config is what New is told: defaults (defaults.go) with the options applied over them, then
// validate, which also works out the timeouts left zero.
type config struct {
	authorCheck  func(context.Context, AuthorClaim) error
	authorShun   func(author, via peer.ID) bool
	certificate  func() string
	prefix       string
	capabilities []string
	interval     time.Duration
	suspectAfter int
	stuckAfter   time.Duration
	forgetAfter  time.Duration
	checkEvery   time.Duration // 0: derived from interval; <0: no ticker, the owner calls Check
	clock        func() time.Time
	log          *slog.Logger
	peerRate     rate.Limit
	peerBurst    int
	version      string
	direct       []peer.AddrInfo
	disc         discovery.Discovery
	source       PeerSource
	leaveFlush   time.Duration
	replayCap    int
	inspectEvery time.Duration
	maxAgents    int
	meshBudget   int
	maxWatched   int
	watchFor     time.Duration
	connHigh     int                        // WithConnLimit; 0: unknown
	healthMax    int                        // 0: local health off
	restore      []protocol.ReplayEntry     // WithReplayRestore
	delivered    func(protocol.ReplayEntry) // WithDeliveredHook
	verifier     *protocol.Verifier         // nil until New: see WithVerifier
	seed         uint64                     // WithSeed; 0: the global source
}

func (c *config) validate() error {
	if !strings.HasPrefix(c.prefix, "/") || !strings.HasSuffix(c.prefix, "/") || len(c.prefix) < 3 {
		return fmt.Errorf("pubsub: topic prefix %q must start and end with '/', like %q", c.prefix, DefaultTopicPrefix)
	}
	if c.interval < MinHeartbeatInterval || c.interval > MaxHeartbeatInterval {
		return fmt.Errorf("pubsub: heartbeat interval %s is outside %s..%s", c.interval, MinHeartbeatInterval, MaxHeartbeatInterval)
	}
	if c.suspectAfter < 1 || c.suspectAfter > 100 {
		return fmt.Errorf("pubsub: suspect-after %d beats is outside 1..100", c.suspectAfter)
	}
	if c.stuckAfter == 0 {
		// The draft's 600 s, unless the beat is so slow that suspicion comes later: an agent is
		// then stuck one beat after it is suspect (a 300 s beat: suspect at 900 s, stuck at
		// 1200 s).
		c.stuckAfter = max(DefaultStuckAfter, time.Duration(c.suspectAfter+1)*c.interval)
	}
	if c.forgetAfter == 0 {
		c.forgetAfter = max(DefaultForgetAfter, c.stuckAfter)
	}
	if c.stuckAfter <= time.Duration(c.suspectAfter)*c.interval {
		return fmt.Errorf("pubsub: stuck-after %s must exceed suspect-after (%d beats of %s)", c.stuckAfter, c.suspectAfter, c.interval)
	}
	if c.forgetAfter < c.stuckAfter {
		return fmt.Errorf("pubsub: forget-after %s must be at least stuck-after %s", c.forgetAfter, c.stuckAfter)
	}
	if c.peerRate <= 0 || c.peerBurst < 1 {
		return fmt.Errorf("pubsub: peer rate %v/s with burst %d: both must be positive", c.peerRate, c.peerBurst)
	}
	if c.leaveFlush < 0 || c.leaveFlush > 10*time.Second {
		return fmt.Errorf("pubsub: leave flush %s is outside 0..10s", c.leaveFlush)
	}
	if c.inspectEvery < 100*time.Millisecond || c.inspectEvery > time.Hour {
		return fmt.Errorf("pubsub: score inspection every %s is outside 100ms..1h", c.inspectEvery)
	}
	if c.maxAgents < MinMaxAgents || c.maxAgents > MaxMaxAgents {
		return fmt.Errorf("pubsub: max agents %d is outside %d..%d", c.maxAgents, MinMaxAgents, MaxMaxAgents)
	}
	if c.meshBudget < 1 || c.maxWatched < 1 || c.watchFor < c.interval {
		return fmt.Errorf("pubsub: mesh budget %d and watch set %d must be positive, and a watch (%s) must last at least one beat (%s)",
			c.meshBudget, c.maxWatched, c.watchFor, c.interval)
	}
	if c.healthMax < 0 || c.healthMax > maxHealthScore {
		return fmt.Errorf("pubsub: local health max score %d is outside 0..%d", c.healthMax, maxHealthScore)
	}
	for _, cp := range c.capabilities {
		if err := ValidateCapability(cp); err != nil {
			return err
		}
	}
	return nil
}

// checkInterval is how often the liveness checker ticks: a quarter beat, at most 1 s, so
// that a silence is noticed within a small fraction of the suspect timeout.
func (c *config) checkInterval() time.Duration {
	if c.checkEvery != 0 {
		return c.checkEvery
	}
	return c.defaultCheckInterval()
}

func (c *config) defaultCheckInterval() time.Duration { return min(c.interval/4, time.Second) }

// lateTick is how late a tick of the checker or the beat loop may be before it counts as local
// trouble: a quarter of the check interval, at least minLateTick (100 ms at the simulator's
// 1 s beat, 250 ms at the default 30 s).
func (c *config) lateTick() time.Duration {
	d := c.checkEvery
	if d <= 0 {
		d = c.defaultCheckInterval()
	}
	return max(d/4, minLateTick)
}

// livenessConfig is the configuration of the liveness table. A beat sent at most one check
// interval after this node suspected its agent refutes the suspicion: the checker raises a
// suspicion up to one tick after it is due.
func (c *config) livenessConfig() LivenessConfig {
	lc := LivenessConfig{Interval: c.interval, SuspectAfter: c.suspectAfter, StuckAfter: c.stuckAfter,
		ForgetAfter: c.forgetAfter, MaxAgents: c.maxAgents, MaxHealthScore: c.healthMax,
		MaxWatched: c.maxWatched, WatchFor: c.watchFor, ConnHigh: c.connHigh,
		LateTick: c.lateTick(), RefuteGrace: c.defaultCheckInterval()}
	if lc.MaxHealthScore == 0 {
		lc.MaxHealthScore = -1 // off
	}
	return lc
}
