package api

import (
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
)

// maxBookEntries bounds the answer book: at about 200 bytes an entry, 3 MiB at most.
// maxSenderEntries bounds one sender's share of the links learned from requests shown to the
// agent, so that a peer sending many requests cannot push the others' links out.
const (
	maxBookEntries   = 16384
	maxSenderEntries = maxBookEntries / 16
)

// answerBook links the ids the other drafts correlate answers with to IACP's own, so that an
// agent of another draft reads and writes answers as its draft says, whichever draft the
// other side speaks. IACP correlates an answer to its request's message_id; the other drafts
// to what the request named for its answers (dialect.AnswerCorrelation: ElizaOS reply_with,
// an ACP v2 command's own id).
//
//   - A request this agent sent in its draft, answered later (in the inbox, the WebSocket, a
//     webhook): the answer is shown correlated to what the request named (sent).
//   - A request shown to this agent in its draft, answered with what it named: the answer
//     goes out correlated to the request's message_id, addressed to its sender when the
//     draft's answer names no recipient (an ACP v2 AgentResponse) (received).
//
// The book lives in memory, bounded (oldest out first) and each entry until its request
// expires: after a restart an answer is shown correlated to the request's message_id, which
// the sender also knows (its own document's message_id).
type answerBook struct {
	mu    sync.Mutex
	sent  map[string]bookEntry // request message_id -> what its sender's draft correlates to
	recv  map[string]bookEntry // what the agent's draft correlates to -> the request
	order []bookKey            // insertion order, for eviction; a ring of at most maxBookEntries
	head  int
	// perSender counts each sender's entries in recv (at most maxSenderEntries).
	perSender map[string]int
}

// bookEntry is one link: the id on the other side, the request's sender (recv only), and
// when the request expires. ambiguous marks a recv key two senders' requests share: their
// answers must name their recipient, and are correlated only when it is the right one.
type bookEntry struct {
	id, from  string
	expires   time.Time
	ambiguous bool
}

type bookKey struct {
	recv bool
	key  string
}

func newAnswerBook() *answerBook {
	return &answerBook{sent: map[string]bookEntry{}, recv: map[string]bookEntry{}, perSender: map[string]int{}}
}

// put adds an entry, evicting the oldest when the book is full. A sender over its share of
// recv adds nothing more: its later answers are shown correlated to the message_id.
func (b *answerBook) put(k bookKey, e bookEntry) {
	m := b.sent
	if k.recv {
		m = b.recv
	}
	if old, ok := m[k.key]; ok {
		if k.recv && old.from != e.from {
			e.ambiguous = true
			b.count(old.from, -1)
			b.count(e.from, +1)
		}
		m[k.key] = e
		return
	}
	if k.recv && b.perSender[e.from] >= maxSenderEntries {
		return
	}
	if len(b.order) < maxBookEntries {
		b.order = append(b.order, k)
	} else {
		b.evict(b.order[b.head])
		b.order[b.head] = k
		b.head = (b.head + 1) % maxBookEntries
	}
	m[k.key] = e
	if k.recv {
		b.count(e.from, +1)
	}
}

// count adds d to sender's share of recv.
func (b *answerBook) count(sender string, d int) {
	if b.perSender[sender] += d; b.perSender[sender] <= 0 {
		delete(b.perSender, sender)
	}
}

// evict removes the entry k names.
func (b *answerBook) evict(k bookKey) {
	if !k.recv {
		delete(b.sent, k.key)
		return
	}
	b.count(b.recv[k.key].from, -1)
	delete(b.recv, k.key)
}

// noteSent records a request the agent sent in draft d, when d correlates its answers to
// something other than its message_id.
func (b *answerBook) noteSent(req *protocol.Message, d dialect.Dialect) {
	if d == dialect.IACP || req.Message.Type != protocol.TypeRequest {
		return
	}
	if ac := dialect.AnswerCorrelation(req, d); ac != req.Envelope.MessageID {
		b.mu.Lock()
		b.put(bookKey{key: req.Envelope.MessageID}, bookEntry{id: ac, expires: req.Expires()})
		b.mu.Unlock()
	}
}

// noteShown records a request shown to the agent in draft d: its answer will name
// AnswerCorrelation(req, d).
func (b *answerBook) noteShown(req *protocol.Message, d dialect.Dialect) {
	if d == dialect.IACP || req.Message.Type != protocol.TypeRequest {
		return
	}
	ac := dialect.AnswerCorrelation(req, d)
	b.mu.Lock()
	b.put(bookKey{recv: true, key: ac}, bookEntry{id: req.Envelope.MessageID, from: req.Envelope.Sender.AgentID, expires: req.Expires()})
	b.mu.Unlock()
}

// shown returns the answer m as an agent of draft d reads it: correlated to what the request
// it answers named, when the agent sent that request in d. m itself is not changed.
func (b *answerBook) shown(m *protocol.Message, d dialect.Dialect, now time.Time) *protocol.Message {
	if d == dialect.IACP || !isAnswer(m) || m.Envelope.CorrelationID == "" {
		return m
	}
	b.mu.Lock()
	e, ok := b.sent[m.Envelope.CorrelationID]
	b.mu.Unlock()
	if !ok || now.After(e.expires) {
		return m
	}
	c := *m
	c.Envelope.CorrelationID = e.id
	return &c
}

// answering readies an answer the agent wrote in draft d: correlated to the request's
// message_id, and addressed to the request's sender when it names no recipient.
func (b *answerBook) answering(m *protocol.Message, now time.Time) {
	if !isAnswer(m) || m.Envelope.CorrelationID == "" {
		return
	}
	b.mu.Lock()
	e, ok := b.recv[m.Envelope.CorrelationID]
	b.mu.Unlock()
	if !ok || now.After(e.expires) {
		return
	}
	to := m.Envelope.Recipient.AgentID
	if to == "" && !e.ambiguous {
		m.Envelope.Recipient.AgentID, to = e.from, e.from
	}
	if to == e.from {
		m.Envelope.CorrelationID = e.id
	}
}

func isAnswer(m *protocol.Message) bool {
	return m.Message.Type == protocol.TypeResponse || m.Message.Type == protocol.TypeError
}
