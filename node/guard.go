package node

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"github.com/iacp-node/iacp-node/protocol"
)

// rateLimiter is a token bucket per remote peer. Its map is guarded by mu; idle buckets are
// dropped by sweep so that memory follows the set of active peers.
type rateLimiter struct {
	mu      sync.Mutex
	limit   rate.Limit
	burst   int
	buckets map[peer.ID]*rate.Limiter
}

func newRateLimiter(perSecond float64, burst int) *rateLimiter {
	return &rateLimiter{limit: rate.Limit(perSecond), burst: burst, buckets: make(map[peer.ID]*rate.Limiter)}
}

// allow takes a token for p at now, or returns RATE_LIMITED with the wait until one is free.
func (r *rateLimiter) allow(p peer.ID, now time.Time) error {
	r.mu.Lock()
	b, ok := r.buckets[p]
	if !ok {
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[p] = b
	}
	r.mu.Unlock()
	res := b.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return &protocol.Error{Code: protocol.CodeRateLimited, Message: "peer " + p.String() + " exceeds its message rate", RetryAfter: d}
	}
	return nil
}

// sweep drops buckets that are full again: their peers have been quiet.
func (r *rateLimiter) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, b := range r.buckets {
		if b.TokensAt(now) >= float64(r.burst) {
			delete(r.buckets, p)
		}
	}
}

// policy says which agents may use which intents. It is immutable after construction.
type policy []PolicyRule

// allows reports whether agentID may use intent. An empty policy allows everything. Responses,
// errors and heartbeats are always allowed: they answer or report, they ask nothing.
func (p policy) check(agentID string, t protocol.Type, intent protocol.Intent) error {
	if len(p) == 0 || t == protocol.TypeResponse || t == protocol.TypeError || t == protocol.TypeHeartbeat {
		return nil
	}
	for _, r := range p {
		if !protocol.MatchAgent(r.Agents, agentID) {
			continue
		}
		for _, i := range r.Intents {
			if i == intent || i == "*" {
				return nil
			}
		}
	}
	return protocol.Errorf(protocol.CodePermissionDenied, "agent %s may not use intent %s here", agentID, intent)
}
