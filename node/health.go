package node

import (
	"time"
)

// maintain keeps the peers the node needs (peers added with AddPeer, and the bootstrap peers
// when discovery is off) connected (IaCP 1.0 section 5.3.2): it protects their connections from the connection
// manager, pings them every KeepAlive, and redials lost ones with exponential backoff and
// jitter. It also sweeps idle rate-limit buckets.
func (n *Node) maintain() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPing := time.Now()
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
		}
	}
}
