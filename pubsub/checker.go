package pubsub

import (
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// emitLocked logs a transition and offers it to subscribers; the caller holds stateMu.
func (g *Gossip) emitLocked(tr Transition) {
	g.log.Debug("liveness", "peer_agent", tr.AgentID, "from", tr.From, "to", tr.To, "reason", tr.Reason)
	g.publishLocal(&Item{Kind: KindTransition, Transition: tr})
}

// Forget drops agentID from the liveness table when pid speaks for it (a node whose
// certificate was revoked, say) and tells subscribers with a transition to StateGone and
// reason. It reports whether there was such a row. Whether the agent comes back is the
// author check's to decide (WithAuthorCheck): a beat it lets through adds the row again.
func (g *Gossip) Forget(agentID string, pid peer.ID, reason string) bool {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	tr, ok := g.live.Forget(agentID, pid, g.cfg.clock(), reason)
	if ok {
		g.emitLocked(tr)
	}
	return ok
}

// disconnected is the network notifiee callback: it must not block nor lock.
func (g *Gossip) disconnected(_ network.Network, c network.Conn) {
	select {
	case g.lost <- c.RemotePeer():
	default:
		// The queue is full: this disconnect falls back to the heartbeat timeout.
		g.lostOver.Store(true)
	}
}

// run owns the checker ticker and the disconnect queue.
func (g *Gossip) run() {
	defer g.wg.Done()
	var tick <-chan time.Time
	if d := g.cfg.checkInterval(); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-g.ctx.Done():
			return
		case scheduled := <-tick:
			// A ticker's value is the time the tick was due, not when it was received.
			g.ticked("a tick of the liveness checker", scheduled, time.Now())
			g.Check()
			g.probeDue(g.cfg.clock())
		case p := <-g.lost:
			g.peerLost(p)
		}
	}
}

func (g *Gossip) peerLost(p peer.ID) {
	if g.h.Network().Connectedness(p) == network.Connected {
		return // another connection to the peer remains
	}
	g.stateMu.Lock()
	g.live.Disconnected(p)
	g.stateMu.Unlock()
}

// Check applies the silence rules now (suspect, stuck, forgotten) and emits the transitions.
// The run goroutine calls it every check interval; an owner that set WithCheckInterval(-1)
// calls it itself, typically after advancing its clock.
func (g *Gossip) Check() {
	now := g.cfg.clock()
	g.limiter.prune(now)
	if g.lostOver.Swap(false) {
		g.log.Warn("disconnect notifications overflowed; those peers will be suspected by heartbeat timeout")
	}
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	for _, tr := range g.live.Tick(now) {
		g.emitLocked(tr)
	}
}
