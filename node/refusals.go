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
// from, its size and hash, the code, and the code's description as the reason; never its
// payload, and no text of a document that failed a check (the reason of an error can quote
// the document, so it goes to the node's log only; the message id is kept when it is a
// UUID). And refusals cannot fill the disk: each peer may add refusalAuditBurst entries at
// once and one per refusalAuditEvery after, the node refusalAuditNodeBurst at once and
// refusalAuditNodeRate a second in all; refusals not written are counted, a peer's in its
// next entry (Entry.Suppressed), all of them in Safety().RefusalsNotAudited.
const (
	refusalAuditEvery = time.Second
	refusalAuditBurst = 10
	// refusalAuditNodeRate and refusalAuditNodeBurst bound the refusal entries of all peers
	// together: many cheap peer ids, each within its own budget, write at most this.
	refusalAuditNodeRate  = 50
	refusalAuditNodeBurst = 200
	// refusalAuditPeers bounds the peers whose refusal budgets are kept; past it the idle ones
	// are dropped, and a new peer's refusals are not written until room frees.
	refusalAuditPeers = 4096
)

// refusalAudit is the budget of refusal entries, per peer and node-wide. Its state is
// guarded by mu.
type refusalAudit struct {
	mu         sync.Mutex
	node       *rate.Limiter
	peers      map[peer.ID]*refusalBudget
	notWritten uint64
}

type refusalBudget struct {
	lim        *rate.Limiter
	suppressed int
	last       time.Time
}

func newRefusalAudit() *refusalAudit {
	return &refusalAudit{node: rate.NewLimiter(refusalAuditNodeRate, refusalAuditNodeBurst), peers: make(map[peer.ID]*refusalBudget)}
}

// admit reports whether a refusal of p at now may be written, and if so how many of p's were
// not written before it.
func (a *refusalAudit) admit(p peer.ID, now time.Time) (ok bool, suppressed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, found := a.peers[p]
	if !found {
		if len(a.peers) >= refusalAuditPeers {
			a.sweepLocked(now)
		}
		if len(a.peers) >= refusalAuditPeers {
			a.notWritten++
			return false, 0
		}
		b = &refusalBudget{lim: rate.NewLimiter(rate.Every(refusalAuditEvery), refusalAuditBurst)}
		a.peers[p] = b
	}
	b.last = now
	if !b.lim.AllowN(now, 1) || !a.node.AllowN(now, 1) {
		b.suppressed++
		a.notWritten++
		return false, 0
	}
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

// sweepLocked drops the budgets of peers quiet for a minute.
func (a *refusalAudit) sweepLocked(now time.Time) {
	for p, b := range a.peers {
		if now.Sub(b.last) > time.Minute {
			delete(a.peers, p)
		}
	}
}

func (a *refusalAudit) unwritten() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.notWritten
}

// refused audits the refusal of a frame from remote: raw as received, m when it decoded (nil
// otherwise), and why. It is rate-limited per peer (refusalAudit).
func (a *auditLog) refused(raw []byte, remote peer.ID, m *protocol.Message, cause error) {
	ok, suppressed := a.refusals.admit(remote, a.now())
	if !ok {
		return
	}
	code := protocol.CodeOf(cause)
	reason := "not a document"
	if m != nil {
		info, _ := protocol.Lookup(code)
		reason = info.Description
	}
	e := audit.Refusal(raw, remote.String(), code, reason)
	e.Suppressed = suppressed
	if m != nil {
		if _, err := uuid.Parse(m.Envelope.MessageID); err == nil && len(m.Envelope.MessageID) == 36 {
			e.MessageID = m.Envelope.MessageID
		}
	}
	a.write(e)
}
