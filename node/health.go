package node

import (
	"time"

	"github.com/iacp-node/iacp-node/store"
)

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
	n.peers.reconnect(n.ctx, time.Now())
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-tick.C:
			n.peers.reconnect(n.ctx, now)
			n.wire.repunch(now)
			if now.Sub(lastPing) >= n.cfg.KeepAlive {
				lastPing = now
				n.peers.keepAlive(n.ctx)
			}
			n.wire.rate.sweep(n.now())
			if now.Sub(lastPurge) >= purgeEvery {
				lastPurge = now
				n.purgeSeen()
			}
		}
	}
}
