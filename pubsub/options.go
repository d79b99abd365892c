package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// Option configures New.
type Option func(*config) error

// WithTopicPrefix sets the topic prefix (default DefaultTopicPrefix). It must start and end
// with '/'.
func WithTopicPrefix(p string) Option { return func(c *config) error { c.prefix = p; return nil } }

// WithCapabilities sets the capabilities whose group topics the node joins at start (default
// none). JoinGroup and LeaveGroup change them later.
func WithCapabilities(caps []string) Option {
	return func(c *config) error { c.capabilities = append([]string(nil), caps...); return nil }
}

// WithHeartbeatInterval sets how often this node beats (default 30 s, 1 s to 300 s). It is
// also announced in every beat, so that receivers time this agent's silence by its own beat.
func WithHeartbeatInterval(d time.Duration) Option {
	return func(c *config) error { c.interval = d; return nil }
}

// WithSuspectAfter sets how many missed beats make an agent suspect (default 3, 1 to 100).
func WithSuspectAfter(beats int) Option {
	return func(c *config) error { c.suspectAfter = beats; return nil }
}

// WithStuckAfter sets the silence after which an agent is stuck (default 600 s, or one beat
// after the suspect timeout when that is later).
func WithStuckAfter(d time.Duration) Option {
	return func(c *config) error { c.stuckAfter = d; return nil }
}

// WithForgetAfter sets the silence after which an agent leaves the table (default 1 h, or the
// stuck timeout when that is later).
func WithForgetAfter(d time.Duration) Option {
	return func(c *config) error { c.forgetAfter = d; return nil }
}

// WithCheckInterval sets how often the liveness checker ticks (default a quarter of the
// heartbeat interval, at most 1 s). A negative value starts no ticker: the owner calls Check.
func WithCheckInterval(d time.Duration) Option {
	return func(c *config) error { c.checkEvery = d; return nil }
}

// WithScoreInspection sets how often the snapshot PeerScores returns is refreshed (default
// DefaultScoreInspection, 100 ms to 1 h).
func WithScoreInspection(d time.Duration) Option {
	return func(c *config) error { c.inspectEvery = d; return nil }
}

// WithClock sets the clock used for validation (TTL, timestamps), heartbeat timestamps are
// the Builder's own. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("pubsub: WithClock needs a non-nil clock")
		}
		c.clock = now
		return nil
	}
}

// WithLogger sets the logger (default: discard). Tag it with the peer id.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("pubsub: WithLogger needs a non-nil logger")
		}
		c.log = l
		return nil
	}
}

// WithPeerRate sets the per-author token bucket (default 20 messages/s, burst 100).
func WithPeerRate(r rate.Limit, burst int) Option {
	return func(c *config) error { c.peerRate, c.peerBurst = r, burst; return nil }
}

// WithVersion sets the agent software version announced in heartbeats (default empty).
func WithVersion(v string) Option { return func(c *config) error { c.version = v; return nil } }

// WithDirectPeers sets gossipsub direct peers: always sent every message, never pruned (for
// example a fleet coordinator). Default none.
func WithDirectPeers(pis []peer.AddrInfo) Option {
	return func(c *config) error { c.direct = append([]peer.AddrInfo(nil), pis...); return nil }
}

// WithDiscovery lets gossipsub find and connect peers of a topic it has too few of, through
// d (for example a routing discovery on the DHT). Without it, group messages only reach
// members connected to the publisher through other members. Default none.
func WithDiscovery(d discovery.Discovery) Option {
	return func(c *config) error { c.disc = d; return nil }
}

// WithPeerSource lets gossipsub find peers of a topic it has too few of through src, without
// advertising topics anywhere (see PeerSource). It replaces WithDiscovery. Default none.
func WithPeerSource(src PeerSource) Option {
	return func(c *config) error { c.source = src; return nil }
}

// WithSeed seeds the gossip layer's random draws (the first stretched beat's gap), so that a
// run can be repeated (the simulator). Default 0: math/rand/v2's global source.
func WithSeed(seed uint64) Option { return func(c *config) error { c.seed = seed; return nil } }

// WithLeaveFlush sets how long Leave waits for the offline beat to leave (default 250 ms,
// at most 10 s).
func WithLeaveFlush(d time.Duration) Option {
	return func(c *config) error { c.leaveFlush = d; return nil }
}

// WithReplayCapacity bounds the replay window (default protocol.DefaultReplayCapacity).
func WithReplayCapacity(n int) Option { return func(c *config) error { c.replayCap = n; return nil } }

// WithMaxAgents bounds the liveness table (default DefaultMaxAgents, MinMaxAgents to
// MaxMaxAgents). When a beat from an unknown agent finds the table full, the row heard from
// longest ago is evicted (a "gone" transition) and counted in Stats.Evicted.
func WithMaxAgents(n int) Option { return func(c *config) error { c.maxAgents = n; return nil } }

// WithLocalHealth sets the saturation of the local health score (default
// DefaultMaxHealthScore, 0 to 16; 0 turns local health off, so that the suspect timeouts are
// never scaled). See Health.
func WithLocalHealth(maxScore int) Option {
	return func(c *config) error { c.healthMax = maxScore; return nil }
}

// WithReplayRestore warms the replay window at New with entries saved from an earlier run
// (those gathered by WithDeliveredHook, or a ReplayWindow's Snapshot), owners included, so
// that a message delivered before a restart is refused as a duplicate after it. Expired
// entries are skipped; beyond the window's capacity, the entries expiring last are dropped
// (logged). Default none.
func WithReplayRestore(entries []protocol.ReplayEntry) Option {
	return func(c *config) error { c.restore = entries; return nil }
}

// WithDeliveredHook sets a function called for every broadcast and group message that passed
// validation and is delivered to subscribers (not heartbeats, not this node's own messages),
// with its message id, its expiry and its owner in the replay window (the peer that relayed
// it), so that the caller can persist them and restore them with WithReplayRestore after a
// restart. It is called from the topics' reader goroutines, possibly concurrently, before the
// subscribers are offered the item; it must not block (the node queues the entries and
// writes them to its store in batches). Default none.
func WithDeliveredHook(fn func(protocol.ReplayEntry)) Option {
	return func(c *config) error { c.delivered = fn; return nil }
}

// AuthorClaim is what the author check (WithAuthorCheck) is asked about: a gossip message
// signed by Author, whose IACP signature was verified, claims to speak for AgentID. Via is
// the peer that relayed it; Certificate the agent certificate a heartbeat carries ("" for
// none).
type AuthorClaim struct {
	AgentID     string
	Author, Via peer.ID
	Certificate string
}

// ErrNotCertified marks an author check's refusal that is a verdict on the author itself: it
// holds no valid certificate for the agent id it speaks for (none, a bad, expired or revoked
// one, or another peer holds the id). A message the author sent directly is then rejected,
// which costs it gossipsub score; a relayed one is ignored, since its relayer may not know.
var ErrNotCertified = errors.New("the author holds no valid certificate for its agent id")

// WithAuthorCheck makes every gossip message pass check before it is taken or relayed: a
// message whose sender agent id check does not bind to its author is neither delivered nor
// forwarded. It is ignored, and its relayer not penalised, unless check's error wraps
// ErrNotCertified and the author sent it itself: then it is rejected. check may wait on the
// network until ctx ends (at most AuthorCheckWait): the node checks the certificate a
// heartbeat carries, or fetches one it does not hold yet from the relayer, which verified it
// before relaying (authority mode). A message must not be dropped for want of a certificate
// an honest relayer hands over, or it would also not be relayed, and every node behind this
// one would lose it. With a check, validators run on goroutines of their own, off gossipsub's
// pipeline. Default none: any author may speak for any agent id, within the liveness table's
// first-come rule.
func WithAuthorCheck(check func(context.Context, AuthorClaim) error) Option {
	return func(c *config) error { c.authorCheck = check; return nil }
}

// WithAuthorShun lets the node turn away, before their signature is verified, the messages
// of an author that the author check (WithAuthorCheck) would refuse or keep waiting at once:
// shun reports such an author (one whose certificate failed recently, or whose certificate
// must come from a peer that let a request run into its deadline). It is asked only about
// messages that carry no certificate, so that a heartbeat that carries one is always checked.
// A flood by stalling authors then costs decoding, not an Ed25519 verification a message.
// Default none.
func WithAuthorShun(shun func(author, via peer.ID) bool) Option {
	return func(c *config) error { c.authorShun = shun; return nil }
}

// WithCertificate makes this node's heartbeats carry its agent certificate, as cert returns
// it, so that nodes hearing it for the first time check it without an exchange. Default none.
func WithCertificate(cert func() string) Option {
	return func(c *config) error { c.certificate = cert; return nil }
}

// WithMeshBudget sets how many beats per interval the heartbeat topic carries at most (about):
// beyond that many agents, every agent stretches its mesh beat (default DefaultMeshBudget; see
// docs/scale.md).
func WithMeshBudget(beats int) Option {
	return func(c *config) error { c.meshBudget = beats; return nil }
}

// WithConnLimit tells liveness the connection manager's high watermark (node's conn_high): in
// a mesh of at most that many agents no connection is trimmed, and a lost one is a hint about
// every agent of the peer (see LivenessConfig.ConnHigh). Default 0: unknown.
func WithConnLimit(high int) Option {
	return func(c *config) error { c.connHigh = max(high, 0); return nil }
}

// WithWatch sets the watch set: at most max agents probed directly, each for watchFor after
// the last Watch (defaults DefaultMaxWatched and DefaultWatchFor).
func WithWatch(max int, watchFor time.Duration) Option {
	return func(c *config) error { c.maxWatched, c.watchFor = max, watchFor; return nil }
}

// WithVerifier sets the verifier of gossip signatures, with its caches: a node passes the one
// it verifies its direct messages with, and a process of many nodes one they share. Default:
// a verifier of the Gossip's own, with a key cache of protocol.DefaultKeyCacheSize and no
// verification cache.
func WithVerifier(v *protocol.Verifier) Option {
	return func(c *config) error { c.verifier = v; return nil }
}
