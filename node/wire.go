package node

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/quietlog"
	"github.com/iacp-node/iacp-node/internal/workers"
	"github.com/iacp-node/iacp-node/protocol"
)

// wire is the node's message path over /iacp/1.0.0 (docs/architecture.md, "A message's
// path"): the streams it reads and writes, the bounds on what a peer can make it hold (rates,
// queue budget, the large frame's slot), the checks in order, the waiters for receipts and
// replies, the answers kept for resends, and the handlers. It is the node's own path, so it
// reaches the node's other parts (trust, peers, durable delivery, approvals, the mesh)
// through the node it is built into. Its state is split by owner: handlers under handlersMu,
// waiters under waitersMu, sessions and inbound streams under sessionsMu; the limiters,
// budgets, windows and logs guard themselves; the rest is set in New and read-only after.
type wire struct {
	*Node

	limits  protocol.Limits
	replay  *protocol.ReplayWindow
	rate    *rateLimiter
	budget  *queueBudget
	large   chan struct{} // the slot of the large frame being served (holdLarge)
	audits  *refusalAudit
	quiet   *quietlog.Logger // what peers make the node refuse: a log line per peer per interval
	policy  policy
	slots   chan struct{} // handler concurrency
	workers *workers.Pool // the goroutines Go handlers run on (at most idleWorkers parked)

	handlersMu sync.RWMutex
	handlers   map[protocol.Intent]Handler
	fallback   Handler

	waitersMu sync.Mutex
	waiters   map[string]*waiter
	answered  answered // answers to recent requests, for their resends (answered.go)

	sessionsMu sync.Mutex
	sessions   map[peer.ID]*session
	inbound    map[*inStream]struct{}
}
