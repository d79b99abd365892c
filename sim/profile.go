package sim

import (
	"time"

	"github.com/iacp-node/iacp-node/node"
)

// NodeProfile is the configuration every simulated node starts from: node.DefaultConfig
// adjusted for many nodes in one process on a fast, reliable network, as memberlist's
// DefaultLocalConfig adjusts its LAN configuration. A scenario's node section is applied over
// it (NodeSpec: a key it leaves out keeps the profile's value), then each slot's agent,
// identity, data directory, host and bootstrap peers.
func NodeProfile() node.Config {
	c := node.DefaultConfig()
	// A beat a second: the steps that measure failure detection run for seconds (suspicion
	// comes after suspect_after missed beats), and a deployed node's interval would make
	// every scenario last minutes.
	c.HeartbeatInterval = time.Second
	// 1000 messages a second from each peer, in bursts of 2000, above a deployed node's
	// limit: load steps concentrate requests on few pairs in small meshes.
	c.RatePerSecond, c.RateBurst = 1000, 2000
	// Bootstrap retries from 200 ms up to 5 s (the defaults are for a network that can be
	// down for minutes): a node restarted in a step rejoins within it.
	c.BootstrapRetryMin, c.BootstrapRetryMax = 200*time.Millisecond, 5*time.Second
	// The routing table is checked every 5 s, for the same reason.
	c.DHTHealthInterval = 5 * time.Second
	// A leaving node waits 50 ms for its offline beat to go out: the links are in memory or
	// on loopback, and scenarios stop many nodes at once.
	c.LeaveFlush = 50 * time.Millisecond
	return c
}

// nodeConfig is NodeProfile with the scenario's node section applied (after defaults()
// filled it, so every field is set), and seed for the node's discovery backoff jitter.
func (n NodeSpec) nodeConfig(seed uint64) node.Config {
	c := NodeProfile()
	c.HeartbeatInterval = n.HeartbeatInterval.D()
	c.RatePerSecond, c.RateBurst = n.RatePerSecond, int(2*n.RatePerSecond)
	c.ConnLow, c.ConnHigh, c.ConnGrace = n.ConnLow, n.ConnHigh, n.ConnGrace.D()
	c.RetryMin, c.RetryMax = n.RetryMin.D(), n.RetryMax.D()
	c.Discovery, c.Gossip = boolOr(n.Discovery, c.Discovery), boolOr(n.Gossip, c.Gossip)
	c.Durable, c.Audit = boolOr(n.Durable, c.Durable), boolOr(n.Audit, c.Audit)
	c.Seed = seed
	if n.DHTQuorum > 0 {
		c.DHTQuorum = n.DHTQuorum
	}
	if n.DHTBucketSize > 0 {
		c.DHTBucketSize = n.DHTBucketSize
	}
	c.SuspectAfter = n.SuspectAfter
	c.MeshBudget = n.MeshBudget
	return c
}

// fillFrom sets every field of the node section the scenario left out from the profile p (and
// from the simulator's own defaults for the keys that are not node.Config's).
func (n *NodeSpec) fillFrom(p node.Config) {
	if n.HeartbeatInterval == 0 {
		n.HeartbeatInterval = Duration(p.HeartbeatInterval)
	}
	if n.SuspectAfter == 0 {
		n.SuspectAfter = p.SuspectAfter
	}
	if n.MeshBudget == 0 {
		n.MeshBudget = p.MeshBudget
	}
	if n.BootstrapPeers == 0 {
		n.BootstrapPeers = 1
	}
	if n.RatePerSecond == 0 {
		n.RatePerSecond = p.RatePerSecond
	}
	if n.ConnLow == 0 {
		n.ConnLow = p.ConnLow
		if n.ConnHigh > 0 {
			n.ConnLow = min(n.ConnLow, n.ConnHigh)
		}
	}
	if n.ConnHigh == 0 {
		n.ConnHigh = max(p.ConnHigh, n.ConnLow)
	}
	if n.ConnGrace == 0 {
		n.ConnGrace = Duration(p.ConnGrace)
	}
	if n.RetryMin == 0 {
		n.RetryMin = Duration(p.RetryMin)
	}
	if n.RetryMax == 0 {
		n.RetryMax = Duration(p.RetryMax)
	}
	for _, b := range []struct {
		dst **bool
		def bool
	}{{&n.Discovery, p.Discovery}, {&n.Gossip, p.Gossip}, {&n.Durable, p.Durable}, {&n.Audit, p.Audit}} {
		v := boolOr(*b.dst, b.def)
		*b.dst = &v
	}
}

// boolOr is *p, or def when p is nil (a switch the scenario left out).
func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
