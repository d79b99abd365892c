package node

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/iacp-node/iacp-node/internal/retry"
)

// backoff is the reconnect schedule of one needed peer. It is owned by the maintain loop
// (read and written under dirMu).
type backoff struct {
	attempts int
	next     time.Time
}

// maintain keeps the peers the node needs (bootstrap peers and peers added with AddPeer)
// connected (IaCP 1.0 section 5.3.2): it protects their connections from the connection
// manager, pings them every KeepAlive, and redials lost ones with exponential backoff and
// jitter. It also sweeps idle rate-limit buckets.
func (n *Node) maintain() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPing := time.Now()
	n.reconnect(time.Now())
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-tick.C:
			n.reconnect(now)
			n.repunch(now)
			if now.Sub(lastPing) >= n.cfg.KeepAlive {
				lastPing = now
				n.keepAlive()
			}
			n.rate.sweep(n.now())
		}
	}
}

func (n *Node) neededPeers() []peer.ID {
	n.dirMu.RLock()
	defer n.dirMu.RUnlock()
	out := make([]peer.ID, 0, len(n.needed))
	for p := range n.needed {
		out = append(out, p)
	}
	return out
}

// reconnect dials every needed peer that is not connected and whose backoff has passed.
func (n *Node) reconnect(now time.Time) {
	for _, p := range n.neededPeers() {
		n.host.ConnManager().Protect(p, "iacp-needed")
		if n.host.Network().Connectedness(p) == network.Connected {
			n.dirMu.Lock()
			n.needed[p].attempts = 0
			n.dirMu.Unlock()
			continue
		}
		n.dirMu.RLock()
		due := !now.Before(n.needed[p].next)
		n.dirMu.RUnlock()
		if !due {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.FrameTimeout)
		err := n.host.Connect(ctx, peer.AddrInfo{ID: p})
		cancel()
		n.dirMu.Lock()
		b := n.needed[p]
		if err != nil {
			b.attempts++
			// ReconnectMin doubled per failed dial, capped at ReconnectMax, with jitter so that
			// nodes that lost the same peer do not redial it in lockstep.
			wait := retry.Backoff{Min: n.cfg.ReconnectMin, Max: n.cfg.ReconnectMax}.Delay(b.attempts, rand.Int64N)
			b.next = now.Add(wait)
			n.log.Warn("peer unreachable; will retry", "peer", p.ShortString(), "attempt", b.attempts, "retry_in", wait.Round(time.Millisecond), "err", err.Error())
		} else {
			if b.attempts > 0 {
				n.log.Info("peer reconnected", "peer", p.ShortString(), "after_attempts", b.attempts)
			}
			b.attempts = 0
		}
		n.dirMu.Unlock()
	}
}

// keepAlive pings every connected needed peer once; the round trip also feeds the
// peerstore's latency estimate.
func (n *Node) keepAlive() {
	for _, p := range n.neededPeers() {
		if n.host.Network().Connectedness(p) != network.Connected {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.FrameTimeout)
		select {
		case res := <-ping.Ping(ctx, n.host, p):
			if res.Error != nil {
				n.log.Debug("keep-alive ping failed", "peer", p.ShortString(), "err", res.Error.Error())
			}
		case <-ctx.Done():
		}
		cancel()
	}
}
