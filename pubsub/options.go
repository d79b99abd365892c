package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// Defaults. Each number says why it is what it is.
const (
	// DefaultTopicPrefix versions every topic, so that a future IACP 2 mesh can share hosts
	// with this one without mixing documents.
	DefaultTopicPrefix = "/iacp/1/"
	// DefaultHeartbeatInterval is IaCP 1.0 section 5.3.2's 30 s.
	DefaultHeartbeatInterval = 30 * time.Second
	// MinHeartbeatInterval is the fastest beat allowed: tests and the simulator use it;
	// anything faster would be noise next to gossipsub's own 1 s heartbeat.
	MinHeartbeatInterval = time.Second
	// MaxHeartbeatInterval is the slowest beat the draft allows (30 to 300 s).
	MaxHeartbeatInterval = 300 * time.Second
	// DefaultSuspectAfter is how many missed beats make an agent suspect: 3, so 90 s at the
	// default interval, IaCP 1.0's connection timeout.
	DefaultSuspectAfter = 3
	// DefaultStuckAfter is the draft's "no heartbeat for 600 seconds" rule.
	DefaultStuckAfter = 600 * time.Second
	// DefaultForgetAfter drops an agent from the table after an hour of silence, so that the
	// table stays bounded by the agents active in the last hour.
	DefaultForgetAfter = time.Hour
	// DefaultPeerRate is how many messages per second one author may publish, summed over all
	// topics: far above what an agent needs (a beat every 30 s, occasional events), far below
	// what would load the mesh.
	DefaultPeerRate = rate.Limit(20)
	// DefaultPeerBurst lets an author send a burst (a drain sequence, a batch of events).
	DefaultPeerBurst = 100
	// DefaultBufferSize is the depth of a Subscription's channel before items are dropped.
	DefaultBufferSize = 256
	// DefaultLeaveFlush is how long Leave waits after handing the offline heartbeat to
	// gossipsub: pubsub reports no write completion, and Close resets its streams.
	DefaultLeaveFlush = 250 * time.Millisecond
	// DefaultGroupPublishWait bounds how long SendToGroup waits for a member of the group to
	// be reachable when its context has no deadline.
	DefaultGroupPublishWait = 10 * time.Second
	// MaxCapabilityLength bounds a capability name, which becomes part of a topic name.
	MaxCapabilityLength = 64
	// DefaultScoreInspection is how often PeerScores' snapshot is refreshed. Each refresh
	// scores every peer seen in the last hour (gossipsub retains scores that long); once a
	// second that was 8 % of all CPU in a 500-node simulation.
	DefaultScoreInspection = 10 * time.Second
	// maxGroupTopics bounds the group topics one node joins or publishes to.
	maxGroupTopics = 256
	// DefaultMaxAgents bounds the liveness table: a row costs about 650 bytes with its ids and
	// indexes (measured), so 6.5 MB at the bound; ten times the largest fleet simulated (1,000
	// nodes). Beyond it a new agent evicts the row heard from longest ago, so that beats signed
	// with throwaway keys cannot grow memory without bound.
	DefaultMaxAgents = 10_000
	// MinMaxAgents and MaxMaxAgents bound WithMaxAgents: fewer than 16 rows would evict the
	// agents of a small fleet; a million rows is 650 MB.
	MinMaxAgents = 16
	MaxMaxAgents = 1_000_000
	// MaxGossipTTL is the longest ttl_seconds a document on a gossip topic may carry. Gossip is
	// for what is happening now, and every gossip message's id is kept in the replay window
	// until it expires; a message that must live longer goes over a direct stream, with
	// durable delivery. One hour is the builders' default TTL (protocol.DefaultTTL).
	MaxGossipTTL = time.Hour
	// AuthorCheckWait bounds how long a gossip validator waits for the author check
	// (WithAuthorCheck): one certificate exchange with the relayer, which verified the
	// certificate before it relayed and answers within a round trip. A relayer that does not
	// answer holds a validation this long, and no longer: gossipsub runs each topic's
	// validations within a bound of their own, which a longer wait would let stallers fill.
	AuthorCheckWait = 2 * time.Second
	// DefaultMaxWatched bounds the watch set, the agents a node probes directly (docs/scale.md):
	// the agents it works with. 256 probes per interval cost a node about 256 x 0.1 ms of CPU
	// every 30 s.
	DefaultMaxWatched = 256
	// DefaultWatchFor is how long an agent stays watched after the last message exchanged with
	// it or the last time discovery returned it: 20 beats at the default interval.
	DefaultWatchFor = 10 * time.Minute
	// DefaultMeshBudget is how many beats per interval a node hears on the heartbeat topic:
	// in a mesh of at most this many agents every agent beats every interval, as the drafts
	// say; in a larger one every agent stretches its mesh beat so that the topic carries about
	// this many per interval (docs/scale.md). 64 beats per 30 s is two a second.
	DefaultMeshBudget = 64
	// MaxMeshInterval is the slowest a mesh beat is stretched to: a row of the listing is at
	// most SuspectAfter of it stale (45 minutes at the defaults).
	MaxMeshInterval = 15 * time.Minute
	// DefaultMaxHealthScore saturates the local health score (see Health): the suspect
	// timeouts of a node in trouble grow to at most 9 times their length (27 beats at the
	// default 3), close to memberlist's Lifeguard, whose multiplier stops at 8
	// (AwarenessMaxMultiplier). The stuck timeout is not scaled, so at the default 30 s beat a
	// score of 6 or more lets an agent go from alive to stuck at 600 s without being suspect.
	DefaultMaxHealthScore = 8
	// maxHealthScore bounds WithLocalHealth: a suspicion waits at most 17 times its usual
	// silence (51 beats at the default 3).
	maxHealthScore = 16
	// minLateTick is the least lateness of a tick that counts as local trouble: ticks a few
	// milliseconds late are routine (GC, scheduling); 100 ms is a tenth of the simulator's 1 s
	// beat and well under the half-interval grace of the lost-connection rule.
	minLateTick = 100 * time.Millisecond
	// greetEvery spaces the extra beats sent when the heartbeat topic gains its first peers
	// (see greet): at most one a second, however many peers join.
	greetEvery = time.Second
)

// Option configures New.
type Option func(*config) error

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

func defaults() config {
	return config{
		prefix:       DefaultTopicPrefix,
		interval:     DefaultHeartbeatInterval,
		suspectAfter: DefaultSuspectAfter,
		stuckAfter:   0, // DefaultStuckAfter, or longer for slow beats: see validate
		forgetAfter:  0, // DefaultForgetAfter, or stuckAfter when that is later: see validate
		clock:        time.Now,
		log:          slog.New(slog.DiscardHandler),
		peerRate:     DefaultPeerRate,
		peerBurst:    DefaultPeerBurst,
		leaveFlush:   DefaultLeaveFlush,
		inspectEvery: DefaultScoreInspection,
		maxAgents:    DefaultMaxAgents,
		meshBudget:   DefaultMeshBudget,
		maxWatched:   DefaultMaxWatched,
		watchFor:     DefaultWatchFor,
		healthMax:    DefaultMaxHealthScore,
	}
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
