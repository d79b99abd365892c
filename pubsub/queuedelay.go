package pubsub

import (
	"sync"
	"time"

	pb "github.com/libp2p/go-libp2p-pubsub/pb"
)

// A node under load hears its peers late even when its timers fire on time: their beats wait
// in its own gossip queues (the event loop, the validation queue, the validators, the event
// loop again, the subscription's channel) before the liveness table sees them. That wait is a
// sign of local trouble for the local health score (Lifeguard), and it is measured on this
// node's own clock only, so that no peer can fake it: a peer can lengthen the queues only by
// really loading them, which is what the sign is for.
//
// Two probes measure it:
//   - our own beat, from Publish to our own subscription (gossipsub hands every local
//     publication back): ownBeat;
//   - a sample of peers' beats, from the moment their RPC reaches gossipsub's event loop (the
//     RPC inspector) to our subscription: queueProbes.
//
// A wait longer than the lateness threshold raises the score; a shorter one does nothing (the
// timers' ticks set the pace of the decay).

// ownBeat is this node's last heartbeat on its way through its own gossipsub: published at
// at, handed back to its own subscription some time later.
type ownBeat struct {
	id string
	at time.Time
}

// ownReturned times the way of this node's own last beat through its gossipsub (see above).
func (g *Gossip) ownReturned(id string) {
	b := g.ownBeat.Load()
	if b == nil || b.id != id || !g.ownBeat.CompareAndSwap(b, nil) {
		return
	}
	g.queued("our own heartbeat's way back to us", time.Since(b.at))
}

const (
	// maxQueueProbes bounds the peers' beats being timed at once.
	maxQueueProbes = 64
	// queueProbeStale is how long a sampled beat is waited for. Most never come: gossip
	// delivers every message several times and only the first copy reaches the subscription,
	// and a refused beat never does. A wait longer than this is not measured; the shorter
	// waits of the beats around it are.
	queueProbeStale = 10 * time.Second
)

// queueProbes times a sample of peers' beats through this node's gossip queues: at most one
// new sample per every, at most maxQueueProbes at once. Its map is guarded by mu; the
// inspector adds to it on gossipsub's event loop, the heartbeat topic's reader takes from it.
type queueProbes struct {
	mu    sync.Mutex
	every time.Duration
	at    map[string]time.Time // gossipsub message id -> when its RPC reached the event loop
	last  time.Time            // when the last sample was taken
	timed uint64               // samples that reached our subscription
}

func newQueueProbes(every time.Duration) *queueProbes {
	return &queueProbes{every: every, at: make(map[string]time.Time)}
}

// sample starts timing m, which just reached gossipsub's event loop at now, when a sample is
// due and there is room for it.
func (q *queueProbes) sample(m *pb.Message, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Sub(q.last) < q.every {
		return
	}
	if len(q.at) >= maxQueueProbes {
		for id, t := range q.at {
			if now.Sub(t) > queueProbeStale {
				delete(q.at, id)
			}
		}
		if len(q.at) >= maxQueueProbes {
			return
		}
	}
	id := msgID(m)
	if _, ok := q.at[id]; !ok {
		q.at[id], q.last = now, now
	}
}

// arrived returns how long the message with gossipsub id id took from the event loop to our
// subscription, when it was sampled.
func (q *queueProbes) arrived(id string, now time.Time) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.at[id]
	if !ok {
		return 0, false
	}
	delete(q.at, id)
	q.timed++
	return now.Sub(t), true
}

// probeRPC samples the beats of an incoming RPC; it runs in the RPC inspector.
func (g *Gossip) probeRPC(rpc []*pb.Message) {
	topic := g.heartbeatTopic()
	now := time.Now()
	for _, m := range rpc {
		if m.GetTopic() == topic {
			g.probes.sample(m, now)
			return // one sample per RPC at most
		}
	}
}

// probeArrived times a peer's beat that reached our subscription, when it was sampled.
func (g *Gossip) probeArrived(id string) {
	if d, ok := g.probes.arrived(id, time.Now()); ok {
		g.queued("a peer's heartbeat's way through our gossip queues", d)
	}
}
