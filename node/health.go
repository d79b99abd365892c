package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/store"
)

// backoff is the reconnect schedule of one needed peer. It is owned by the maintain loop
// (read and written under dirMu).
type backoff struct {
	attempts int
	next     time.Time
}

// expirePins forgets the pins no accepted message used within PinExpiry.
func (n *Node) expirePins() {
	if n.cfg.PinExpiry <= 0 {
		return
	}
	if k := n.trust.expire(n.now().Add(-n.cfg.PinExpiry)); k > 0 {
		n.log.Info("trust: expired unused pins", "pins", k, "unused_for", n.cfg.PinExpiry.String())
	}
}

// purgeEvery is how often the store forgets the ids of expired messages (its seen set).
const purgeEvery = time.Minute

// purgeSeen forgets the seen ids whose messages have expired: they can no longer be accepted,
// so forgetting them cannot let a replay through, and the seen set stays as large as the
// messages still alive.
func (n *Node) purgeSeen() {
	if n.store == nil {
		return
	}
	total := 0
	for {
		// Each call removes at most store.MaxPurgePerCall ids, so that a backlog never holds
		// one commit long; a full call means more may be due.
		k, err := n.store.PurgeSeen(n.now())
		total += k
		if err != nil {
			n.log.Error("store: purge seen ids", "err", err.Error())
			break
		}
		if k < store.MaxPurgePerCall || n.ctx.Err() != nil {
			break
		}
	}
	if total > 0 {
		n.log.Debug("store: forgot the ids of expired messages", "count", total)
	}
}

// maintain keeps the peers the node needs (bootstrap peers and peers added with AddPeer)
// connected (IaCP 1.0 section 5.3.2): it protects their connections from the connection
// manager, pings them every KeepAlive, and redials lost ones with exponential backoff and
// jitter. It also sweeps idle rate-limit buckets, saves changed trust pins and purges the
// store's expired seen ids.
func (n *Node) maintain() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPing, lastPurge := time.Now(), time.Now()
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
			if now.Sub(lastPurge) >= purgeEvery {
				lastPurge = now
				n.purgeSeen()
				n.expirePins()
			}
			if err := n.trust.flush(); err != nil {
				n.log.Error("saving trust pins", "err", err.Error())
			}
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
			wait := retry.Backoff{Min: n.cfg.ReconnectMin, Max: n.cfg.ReconnectMax}.Delay(b.attempts, n.jitter.Int64N)
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
