package pubsub

import (
	"context"
	"time"

	ps "github.com/libp2p/go-libp2p-pubsub"
)

// startGreet starts greet on the heartbeat topic's peer events.
func (g *Gossip) startGreet() error {
	th, evs, err := g.peerEvents(g.heartbeatTopic())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(g.ctx)
	g.stopGreet = cancel
	g.wg.Add(1)
	go g.greet(ctx, th, evs)
	return nil
}

// greet makes a (re)started node heard at once. The beat loop's first beat goes out at start,
// when usually no peer has joined the heartbeat topic yet, and the next one an interval later,
// so neighbours would not know the node (or would still see it offline, from its goodbye
// before a restart) for up to a whole interval. greet beats again as soon as the topic gains a
// peer, at most once every greetEvery, until a beat of ours has been published while the topic
// had a peer (the flag heard, set by beat, after which stopGreet ends greet): that peer relays
// it to the whole mesh.
func (g *Gossip) greet(ctx context.Context, th *topicHandle, evs *ps.TopicEventHandler) {
	defer g.wg.Done()
	defer evs.Cancel()
	var last time.Time
	for !g.heard.Load() {
		ev, err := evs.NextPeerEvent(ctx)
		if err != nil {
			return
		}
		if ev.Type != ps.PeerJoin || g.heard.Load() {
			continue
		}
		g.greeting.Store(true)
		// gossipsub announces the join when the peer's subscription arrives, which may be
		// before it can send to the peer; a beat published then reaches nobody.
		if !waitUntil(ctx, time.Until(last.Add(greetEvery)), greetWait, func() bool { return len(th.t.ListPeers()) > 0 }) {
			g.greeting.Store(false)
			continue
		}
		last = time.Now()
		g.learnPace(ctx, th)
		g.greeting.Store(false)
		select {
		case g.greetNow <- struct{}{}:
		default:
		}
	}
}

// learnPace asks one of the heartbeat topic's peers for its last beat (the probe exchange)
// and records it, before the greeting beat: meshInterval adopts the interval the node heard,
// so that a node joining a mesh whose beats have stretched greets it announcing the mesh's
// pace. Announcing the base interval instead held the pacer to it for SuspectAfter beats,
// each of them reaching every agent of the mesh. A peer that does not answer leaves the
// greeting as it was.
func (g *Gossip) learnPace(ctx context.Context, th *topicHandle) {
	peers := th.t.ListPeers()
	if len(peers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if raw, err := g.exchange(ctx, peers[0]); err == nil {
		_ = g.takeDirect(ctx, raw, peers[0])
	}
}

// waitUntil waits first, then polls cond every greetPoll until it holds (true), or until ctx is
// done or bound has passed since the first poll without it (false).
func waitUntil(ctx context.Context, first, bound time.Duration, cond func() bool) bool {
	first = max(first, 0)
	deadline := time.Now().Add(first + bound)
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		t.Reset(greetPoll)
	}
}
