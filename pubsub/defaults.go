package pubsub

import (
	"log/slog"
	"time"

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

// defaults is the config before any option: the table of defaults above.
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
