package node

import (
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
)

// Refused input is audited as what the node knows for sure: the authenticated peer it came
// from, its size and hash, the code and the reason; never its payload, and no field copied
// from a document that failed a check (the message id only when it is a UUID). And a peer
// cannot turn refusals into a disk filler: each peer may add refusalAuditBurst entries at
// once and one per refusalAuditEvery after; the refusals not written are counted and the
// count goes into the peer's next entry (Entry.Suppressed).
const (
	refusalAuditEvery = time.Second
	refusalAuditBurst = 10
	// refusalAuditPeers bounds the peers whose refusal counters are kept; past it the idle
	// ones are dropped (their suppressed counts are lost, their next refusal is written).
	refusalAuditPeers = 4096
)

// refusalAudit is the per-peer budget of refusal entries. Its map is guarded by mu.
type refusalAudit struct {
	mu    sync.Mutex
	peers map[peer.ID]*refusalBudget
}

type refusalBudget struct {
	lim        *rate.Limiter
	suppressed int
	last       time.Time
}

func newRefusalAudit() *refusalAudit {
	return &refusalAudit{peers: make(map[peer.ID]*refusalBudget)}
}

// admit reports whether a refusal of p at now may be written, and if so how many were
// suppressed before it.
func (a *refusalAudit) admit(p peer.ID, now time.Time) (ok bool, suppressed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, found := a.peers[p]
	if !found {
		if len(a.peers) >= refusalAuditPeers {
			a.sweepLocked(now)
		}
		b = &refusalBudget{lim: rate.NewLimiter(rate.Every(refusalAuditEvery), refusalAuditBurst)}
		a.peers[p] = b
	}
	b.last = now
	if !b.lim.AllowN(now, 1) {
		b.suppressed++
		return false, 0
	}
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

// sweepLocked drops the budgets of peers quiet for a minute, or all when none is.
func (a *refusalAudit) sweepLocked(now time.Time) {
	for p, b := range a.peers {
		if now.Sub(b.last) > time.Minute {
			delete(a.peers, p)
		}
	}
	if len(a.peers) >= refusalAuditPeers {
		clear(a.peers)
	}
}

// recordRefusal audits the refusal of a frame from remote: raw as received, m when it decoded
// (nil otherwise), and why. It is rate-limited per peer (refusalAudit).
func (n *Node) recordRefusal(raw []byte, remote peer.ID, m *protocol.Message, cause error) {
	if n.audit == nil {
		return
	}
	ok, suppressed := n.audits.admit(remote, n.now())
	if !ok {
		return
	}
	e := audit.Refusal(raw, remote.String(), protocol.CodeOf(cause), cause.Error())
	e.Suppressed = suppressed
	if m != nil {
		if _, err := uuid.Parse(m.Envelope.MessageID); err == nil && len(m.Envelope.MessageID) == 36 {
			e.MessageID = m.Envelope.MessageID
		}
	}
	if err := n.audit.Append(e); err != nil {
		n.log.Error("audit log append failed", "err", err.Error())
	}
}
