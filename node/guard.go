package node

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"github.com/iacp-node/iacp-node/protocol"
)

// rateLimiter holds, per remote peer, a token bucket of messages and one of bytes, and the
// penalty of a peer that went over either: until its bucket would have refilled, the node
// reads nothing more from it (docs/security.md, "Rates"). Its maps are guarded by mu; idle
// buckets and served penalties are dropped by sweep, so that memory follows the set of
// active peers.
type rateLimiter struct {
	mu        sync.Mutex
	limit     rate.Limit
	burst     int
	byteLimit rate.Limit
	byteBurst int
	buckets   map[peer.ID]*peerBuckets
}

type peerBuckets struct {
	msgs, bytes *rate.Limiter
	penalty     time.Time // frames are not read before it
}

func newRateLimiter(perSecond float64, burst int, bytesPerSecond float64, byteBurst int) *rateLimiter {
	return &rateLimiter{limit: rate.Limit(perSecond), burst: burst, byteLimit: rate.Limit(bytesPerSecond), byteBurst: byteBurst,
		buckets: make(map[peer.ID]*peerBuckets)}
}

func (r *rateLimiter) of(p peer.ID) *peerBuckets {
	b, ok := r.buckets[p]
	if !ok {
		b = &peerBuckets{msgs: rate.NewLimiter(r.limit, r.burst), bytes: rate.NewLimiter(r.byteLimit, r.byteBurst)}
		r.buckets[p] = b
	}
	return b
}

// allow takes a message token for p at now, or returns RATE_LIMITED; the peer is then
// penalised until its bucket would be full again (refill), which retry_after says.
func (r *rateLimiter) allow(p peer.ID, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.of(p)
	res := b.msgs.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		d = max(d, refill(r.burst, r.limit))
		b.penalty = now.Add(d)
		return &protocol.Error{Code: protocol.CodeRateLimited, Message: "peer " + p.String() + " exceeds its message rate", RetryAfter: d}
	}
	return nil
}

// allowBytes takes n byte tokens for p at now. Over the rate, the peer is penalised until its
// bucket would be full again (refill), and allowBytes returns false. A frame larger than the
// burst counts as the burst.
func (r *rateLimiter) allowBytes(p peer.ID, now time.Time, n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.of(p)
	n = min(n, r.byteBurst)
	res := b.bytes.ReserveN(now, n)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		b.penalty = now.Add(max(d, refill(r.byteBurst, r.byteLimit)))
		return false
	}
	return true
}

// refill is how long an emptied bucket of burst tokens takes to fill again at rate: the
// penalty of a peer that went over it, so that its next burst finds a full bucket rather
// than one token.
func refill(burst int, rate rate.Limit) time.Duration {
	return time.Duration(float64(burst) / float64(rate) * float64(time.Second))
}

// retryAfter is how long p's penalty still runs at now.
func (r *rateLimiter) retryAfter(p peer.ID, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.buckets[p]; ok && b.penalty.After(now) {
		return b.penalty.Sub(now)
	}
	return 0
}

// penalized reports whether p is serving a penalty at now.
func (r *rateLimiter) penalized(p peer.ID, now time.Time) bool { return r.retryAfter(p, now) > 0 }

// sweep drops buckets that are full again and whose penalty is over: their peers have been
// quiet.
func (r *rateLimiter) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, b := range r.buckets {
		if b.msgs.TokensAt(now) >= float64(r.burst) && b.bytes.TokensAt(now) >= float64(r.byteBurst) && !b.penalty.After(now) {
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
