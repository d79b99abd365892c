package node

import (
	"github.com/iacp-node/iacp-node/audit"
)

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
	// InboxBytes is what the in-memory inbox holds, of InboxMaxBytes.
	InboxBytes, InboxMaxBytes int
	// AuditBroken is the break the audit log found at start (nil when its chain was intact):
	// a new anchored segment was started and delivery went on.
	AuditBroken *audit.ChainError
}

// Safety returns a snapshot of the node's bounds.
func (n *Node) Safety() Safety {
	s := Safety{
		Queue:     n.budget.stats(),
		ReplayIDs: n.replay.Len(), ReplayCapacity: n.replay.Capacity(), ReplayEvicted: n.replay.Evicted(),
		Pins: n.trust.len(), MaxPins: n.cfg.MaxPins,
		Agents: n.directory.Len(), MaxAgents: n.cfg.MaxAgents,
	}
	s.InboxBytes, s.InboxMaxBytes = n.inbox.usage()
	if n.audit != nil {
		s.AuditBroken = n.audit.Broken()
	}
	return s
}
