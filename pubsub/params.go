package pubsub

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	ps "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
)

// gossipParams are the router parameters for agent meshes (docs/gossip.md, "Parameters").
// They are gossipsub's defaults except where noted.
func gossipParams() ps.GossipSubParams {
	p := ps.DefaultGossipSubParams()
	p.D = 6    // mesh degree: 6 neighbours per topic, log-ish reach in a few hops for 100s of agents
	p.Dlo = 4  // graft below 4 (default 5): small fleets of 5-10 agents keep a stable mesh
	p.Dhi = 12 // prune above 12
	p.Dout = 2 // keep 2 outbound links in the mesh against eclipse by inbound connections
	// 1 s gossip heartbeat (default): mesh repair and IHAVE gossip once a second. (The score
	// decay has a tick of its own, scoreDecayInterval.)
	p.HeartbeatInterval = time.Second
	p.HistoryLength = 5 // message cache: 5 heartbeats of history
	p.HistoryGossip = 3 // advertise the last 3 in IHAVE
	// IHAVE gossip goes to Dlazy (6) peers outside the mesh at each heartbeat, not to a
	// quarter of them (gossipsub v1.1's GossipFactor, 0.25). A node's connections can number
	// several times the mesh: DHT walks leave theirs open until the connection manager trims
	// them, so a node of a 300-node mesh had 100 to 200 peers on the heartbeat topic while it
	// joined (mesh-1000's limits, 48 connections kept), and one of the node's defaults keeps up
	// to 192. A quarter of them is 25 to 50 IHAVE messages a second per topic, each read and
	// checked by its receiver, where the beats themselves reach a node about D times. With
	// Dlazy the 300-node join and convergence took about 9 % less CPU and time
	// (docs/scale.md). Each peer still hears of a message it missed from the gossip of its
	// other peers (each sends IHAVE to 6 of its own at every heartbeat), and the mesh,
	// opportunistic grafting and peer scores are unchanged.
	p.GossipFactor = 0
	// IDONTWANT (gossipsub v1.2) for documents of 16 KiB and more (default 1 KiB). On the first
	// copy of a message at least this large, a node tells each of its mesh peers not to send
	// it one: one RPC per mesh peer to save the duplicates that have not left yet. For a beat
	// (1.3 KB with its certificate) that doubled the RPCs a beat costs the mesh, each about as
	// dear as the duplicate it might save, to spare 1.3 KB; for a large event the bytes win.
	p.IDontWantMessageThreshold = idontwantThreshold
	return p
}

// idontwantThreshold is the least document size for which gossipsub sends IDONTWANT.
const idontwantThreshold = 16 << 10

// seenTTL is how long gossipsub remembers a message id, both in its seen cache (duplicates
// dropped unvalidated) and in the score's delivery records; the default is 2 minutes. Copies
// of a message arrive within a few gossip heartbeats (IHAVE advertises 3 s of history), and a
// copy that comes later still meets the replay window, which refuses it without a signature
// check. At 30 s both caches hold a quarter as many ids: with many agents beating, these two
// caches were the largest part of a node's gossip memory.
const seenTTL = 30 * time.Second

// Score thresholds (docs/gossip.md, "Peer scoring"). One invalid message costs -100, below
// every threshold at once: a forger stops receiving gossip, can no longer publish to us, and
// has its RPCs ignored (graylisted) until the penalty decays.
func scoreThresholds() *ps.PeerScoreThresholds {
	return &ps.PeerScoreThresholds{
		GossipThreshold:             -10, // below: no IHAVE/IWANT with the peer
		PublishThreshold:            -50, // below: we do not flood-publish to the peer
		GraylistThreshold:           -80, // below: every RPC from the peer is ignored
		AcceptPXThreshold:           10,  // only peers that delivered first messages may suggest peers on PRUNE
		OpportunisticGraftThreshold: 1,   // graft better peers when the mesh median falls below 1
	}
}

// scoreDecayInterval is how often gossipsub decays the score counters: 10 s, not its default
// second. Each tick visits every peer whose score is kept (the connected ones and those that
// left within RetainScore, an hour), which in a large mesh is most of the peers a node ever
// met; the counters fade over 10 minutes to an hour, which 10 s steps follow as well as 1 s
// steps (a tenth of the work). Every decay factor below is computed for it.
const scoreDecayInterval = 10 * time.Second

// decay is the factor, per scoreDecayInterval, that fades a counter to DecayToZero over d.
func decay(d time.Duration) float64 {
	return ps.ScoreParameterDecayWithBase(d, scoreDecayInterval, decayToZero)
}

// decayToZero is the value below which a decayed counter is zero: gossipsub's default.
const decayToZero = 0.01

// scoreParams are the peer-level score parameters; per-topic parameters come from
// topicScoreParams, added as topics are joined.
func scoreParams() *ps.PeerScoreParams {
	return &ps.PeerScoreParams{
		Topics:        map[string]*ps.TopicScoreParams{},
		SeenMsgTTL:    seenTTL,
		TopicScoreCap: 20, // positive topic score is capped, so good behaviour cannot buy a forgery
		// P5: no application-specific score; the trust policy lives in the node.
		AppSpecificScore:  func(peer.ID) float64 { return 0 },
		AppSpecificWeight: 1,
		// P6 off: many agents legitimately share one machine or one NAT (a laptop running a
		// fleet, a Kubernetes node), so IP colocation says nothing about Sybils here.
		IPColocationFactorWeight: 0,
		// P7: protocol misbehaviour (broken promises in IWANT, GRAFT during backoff) beyond 6
		// events, squared, decaying over 10 minutes.
		BehaviourPenaltyWeight:    -10,
		BehaviourPenaltyThreshold: 6,
		BehaviourPenaltyDecay:     decay(10 * time.Minute),
		DecayInterval:             scoreDecayInterval,
		DecayToZero:               decayToZero,
		// Keep a disconnected peer's score for an hour, so that a forger cannot reset its
		// score by reconnecting.
		RetainScore: time.Hour,
	}
}

// topicScoreParams are the same for every IACP topic.
func topicScoreParams() *ps.TopicScoreParams {
	return &ps.TopicScoreParams{
		TopicWeight: 1,
		// P1: a small reward for time in the mesh, at most 0.01*300 = 3.
		TimeInMeshWeight:  0.01,
		TimeInMeshQuantum: time.Second,
		TimeInMeshCap:     300,
		// P2: reward first deliveries, at most 10, forgotten over 10 minutes.
		FirstMessageDeliveriesWeight: 1,
		FirstMessageDeliveriesDecay:  decay(10 * time.Minute),
		FirstMessageDeliveriesCap:    10,
		// P3 and P3b off: agents publish rarely and in bursts, so an honest mesh peer would
		// often look like it under-delivers.
		MeshMessageDeliveriesWeight: 0,
		MeshFailurePenaltyWeight:    0,
		// P4: every rejected message costs -100 x count^2, decaying to nothing over an hour.
		InvalidMessageDeliveriesWeight: -100,
		InvalidMessageDeliveriesDecay:  decay(time.Hour),
	}
}

// msgID is the gossipsub message id: 20 bytes of the SHA-256 over the topic, the pubsub
// author (From) and the document's bytes, each of the first two prefixed by its length.
// gossipsub marks an id seen before the user validators run, and without pubsub signatures
// nothing in the message is authentic at that point, so the id must be one that only the
// genuine message has: a forged copy that races a genuine message (other content, another
// topic, or bytes shifted between From and Data) gets an id of its own and cannot censor it.
// Copies of one document are byte-identical (relayers forward what they received), so they
// share one id. A peer that re-publishes a document under its own name gets a new id, so its
// copy is validated and rejected; a re-encoding of a document is caught by the replay window
// (see check). 160 bits keep second preimages out of reach while every cache and IHAVE that
// holds ids stays small. It runs on every copy received: about 0.6 µs and one allocation for a
// heartbeat (BenchmarkMsgID).
func msgID(m *pb.Message) string {
	h := sha256.New()
	var buf [2 * binary.MaxVarintLen64]byte
	topic := m.GetTopic()
	h.Write(binary.AppendUvarint(buf[:0], uint64(len(topic))))
	h.Write([]byte(topic))
	h.Write(binary.AppendUvarint(buf[:0], uint64(len(m.From))))
	h.Write(m.From)
	h.Write(m.Data)
	var sum [sha256.Size]byte
	return string(h.Sum(sum[:0])[:20])
}
