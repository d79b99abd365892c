package node

import "github.com/iacp-node/iacp-node/audit"

// Safety is what the node's bounds hold and what they refused or forgot, for `status` and
// /metrics (docs/security.md lists every bound).
type Safety struct {
	// Queue is the frames read and not yet served (queue_*_bytes).
	Queue QueueStats
	// ReplayIDs and ReplayCapacity are the direct messages' replay window; ReplayEvicted counts
	// the ids forgotten early to make room for another peer's (see protocol.ReplayWindow).
	ReplayIDs, ReplayCapacity int
	ReplayEvicted             uint64
	// Pins and MaxPins are the trust-on-first-use pins; Agents and MaxAgents the directory.
	Pins, MaxPins     int
	Agents, MaxAgents int
	// TrustConflicts counts the claims on agent ids bound to other peers (TrustConflict).
	TrustConflicts uint64
	// InboxBytes is what the in-memory inbox holds, of InboxMaxBytes.
	InboxBytes, InboxMaxBytes int
	// AuditBroken is the break the audit log found at start (nil when its chain was intact):
	// a new anchored segment was started and delivery went on.
	AuditBroken *audit.ChainError
	// LocalHealth is gossip's view of this node's own timeliness (Lifeguard): a score above 0
	// means it found itself slow and waits longer before it suspects others. Zero without
	// gossip.
	LocalHealth GossipHealth
	// Gossip counts what gossip's validators refused and the liveness rows evicted.
	Gossip GossipStats
	// RefusalsNotAudited counts refusals left out of the audit log by its per-peer and
	// node-wide budgets (the rest of each peer's is counted in its next entry).
	RefusalsNotAudited uint64
	// JournalPending and JournalDropped are the delivered gossip ids waiting to be written to
	// the store, and those dropped because too many waited.
	JournalPending int
	JournalDropped uint64
	// DHTStore is the DHT's record store (entries, bytes, evictions). Zero without discovery.
	DHTStore DHTStoreStats
}

// Safety returns a snapshot of the node's bounds.
func (n *Node) Safety() Safety {
	s := Safety{
		Queue:     n.wire.budget.stats(),
		ReplayIDs: n.wire.replay.Len(), ReplayCapacity: n.wire.replay.Capacity(), ReplayEvicted: n.wire.replay.Evicted(),
		Pins: n.trust.PinCount(), MaxPins: n.cfg.MaxPins,
		Agents: n.peers.directory.Len(), MaxAgents: n.cfg.MaxAgents,
	}
	_, s.TrustConflicts, _ = n.trust.Conflicts(^uint64(0))
	s.InboxBytes, s.InboxMaxBytes = n.inbox.usage()
	s.AuditBroken = n.durable.broken()
	s.LocalHealth, s.Gossip, s.DHTStore = n.mesh.stats()
	s.JournalPending, s.JournalDropped = n.durable.journalStats()
	s.RefusalsNotAudited = n.durable.unwritten()
	return s
}
