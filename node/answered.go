package node

import (
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// Bounds of the answer book: how many answers it keeps, how many of them one sender's
// requests may take, and the largest answer it keeps (a larger one is not kept: its request,
// sent again, is answered DUPLICATE as before).
const (
	answeredMax        = 4096
	answeredPerSender  = 512
	answeredMaxBytes   = 64 << 10
	answeredSweepEvery = 256 // answers recorded between two sweeps of expired ones
)

// answered remembers the answer the agent gave to each recent request, until the request
// expires, so that the same request sent again (same message id: the sender's node resends it
// after a crash, as a resumed workflow does) is answered with it instead of DUPLICATE. The
// agent still sees a request once; what its sender can no longer lose is the answer. It is
// bounded in count, per sender and in size, and learns only from answers the agent gave to
// requests that passed every check.
type answered struct {
	mu       sync.Mutex
	byID     map[string]answeredEntry
	order    []string // ids in the order they were recorded (oldest first), for eviction
	perAgent map[string]int
	given    map[string]bool // ids of kept answers written to a resent request (lookup)
	since    int
}

type answeredEntry struct {
	sender  string // the request's sender agent: only its resend is answered
	answer  *protocol.Message
	expires time.Time
}

// answer keeps m, this node's answer (a response or an error) to the request its
// correlation_id names, until the answer expires. The request's sender is the answer's
// recipient. Go handlers' answers and those agents post through the local API all pass here
// (Send).
func (a *answered) answer(m *protocol.Message, now time.Time) {
	if m.Message.Type != protocol.TypeResponse && m.Message.Type != protocol.TypeError {
		return
	}
	a.record(m.Envelope.CorrelationID, m.Envelope.Recipient.AgentID, m.Expires(), m, now)
}

// record keeps m, the answer to request id of sender, until expires.
func (a *answered) record(id, sender string, expires time.Time, m *protocol.Message, now time.Time) {
	if id == "" || len(m.Message.Payload) > answeredMaxBytes || !now.Before(expires) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byID == nil {
		a.byID, a.perAgent, a.given = map[string]answeredEntry{}, map[string]int{}, map[string]bool{}
	}
	if _, ok := a.byID[id]; ok {
		return // the first answer stands
	}
	if a.since++; a.since >= answeredSweepEvery {
		a.sweep(now)
	}
	if a.perAgent[sender] >= answeredPerSender {
		return
	}
	for len(a.byID) >= answeredMax && len(a.order) > 0 {
		a.drop(a.order[0])
		a.order = a.order[1:]
	}
	a.byID[id] = answeredEntry{sender: sender, answer: m, expires: expires}
	a.order = append(a.order, id)
	a.perAgent[sender]++
}

// lookup returns the answer kept for a resent request m, if any, for the caller to write to
// m's sender, and notes that it was served (see served).
func (a *answered) lookup(m *protocol.Message, now time.Time) (*protocol.Message, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byID[m.Envelope.MessageID]
	if !ok || e.sender != m.Envelope.Sender.AgentID || !now.Before(e.expires) {
		return nil, false
	}
	a.given[e.answer.Envelope.MessageID] = true
	return e.answer, true
}

// served reports whether the answer with message id answerID was written to a resent request:
// the agent's own send of it, which the request's resend may overtake (the book keeps an answer
// before it leaves), then meets DUPLICATE at a recipient that has it.
func (a *answered) served(answerID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.given[answerID]
}

// sweep forgets expired answers; the caller holds mu.
func (a *answered) sweep(now time.Time) {
	a.since = 0
	kept := a.order[:0]
	for _, id := range a.order {
		if e, ok := a.byID[id]; ok && !now.Before(e.expires) {
			a.drop(id)
			continue
		}
		if _, ok := a.byID[id]; ok {
			kept = append(kept, id)
		}
	}
	a.order = kept
}

// drop forgets one answer; the caller holds mu and fixes order.
func (a *answered) drop(id string) {
	e, ok := a.byID[id]
	if !ok {
		return
	}
	delete(a.byID, id)
	delete(a.given, e.answer.Envelope.MessageID)
	if a.perAgent[e.sender]--; a.perAgent[e.sender] <= 0 {
		delete(a.perAgent, e.sender)
	}
}
