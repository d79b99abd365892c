package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Delivery is one inbound message waiting in the inbox for the agent to take it.
type Delivery struct {
	// Seq orders deliveries by arrival; it only grows.
	Seq      uint64    `json:"seq"`
	Received time.Time `json:"received"`
	Peer     peer.ID   `json:"peer"`
	// Msg is the message; for one the node keeps on disk (Stored), its envelope, type and
	// intent only: Message reads the whole.
	Msg *protocol.Message `json:"message"`

	size  int  // what it counts against the inbox's bounds
	taken bool // acknowledged; the inbox drops it from pending later (Inbox.compactLocked)
	// load reads the whole message of a Stored delivery; nil when Msg is whole.
	load func() (*protocol.Message, error)
}

// Stored reports whether the node keeps this message on disk rather than in memory: a large
// message, with durable delivery on (docs/node.md, "Memory"). Its Msg holds the envelope, the
// type and the intent; Message reads the rest.
func (d Delivery) Stored() bool { return d.load != nil }

// Message returns the whole message: Msg, or for a Stored delivery the message read from the
// store (an error when the agent took it meanwhile, or the store cannot read it).
func (d Delivery) Message() (*protocol.Message, error) {
	if d.load == nil {
		return d.Msg, nil
	}
	return d.load()
}

// Inbox holds inbound messages that no Go handler takes (the agent uses the local API, or
// registered no handler for the intent) until the agent acknowledges them. Agents pull them,
// or receive them over a WebSocket or a webhook, and Ack each one when taken; what is not
// acknowledged is offered again. Its state is guarded by mu; changed is closed and replaced on
// every arrival so that any number of waiters can block on it.
//
// It holds at most maxBytes in all and perPeer from any one sending peer, so that one peer
// cannot fill it for every other (a message counts its bytes as received, or when unknown its
// payload plus messageOverhead).
//
// Every operation a peer's message or the agent's acknowledgement causes is constant or
// logarithmic in the messages waiting: an inbox filled with a million small messages by many
// peers costs no more per message than an empty one.
type Inbox struct {
	mu   sync.Mutex
	next uint64
	// pending is in Seq order; acknowledged entries stay (taken) until compactLocked, so that
	// an acknowledgement does not move the rest. byID holds the Seq of each waiting message.
	pending  []Delivery
	taken    int
	byID     map[string]uint64
	bytes    int
	maxBytes int
	perPeer  int
	byPeer   map[peer.ID]int
	changed  chan struct{}
	// onAck, when set, is told that the agent took a message (the durable store forgets it).
	onAck func(messageID string) error
	// read, when set, reads a message the durable store holds: a message of at least
	// storedBytes then waits here as its envelope only (Delivery.Stored).
	read func(messageID string) ([]byte, error)
}

// storedBytes is the size from which the inbox keeps a message's envelope only, when the
// store holds the message: the store keeps such a message in a file of its own
// (store.BodyFileBytes), and a full inbox of them would otherwise be 256 MiB of memory.
const storedBytes = store.BodyFileBytes

// DefaultInboxBytes bounds the in-memory inbox: 256 MiB of messages not yet taken.
const DefaultInboxBytes = 256 << 20

// messageOverhead is what a message counts against the inbox beyond its payload: its
// envelope and the bookkeeping around it.
const messageOverhead = 1024

func newInbox(maxBytes, perPeer int) *Inbox {
	return &Inbox{maxBytes: maxBytes, perPeer: perPeer, byPeer: make(map[peer.ID]int), byID: make(map[string]uint64),
		changed: make(chan struct{})}
}

// sizeOf is what m counts against the inbox: the document's bytes as received when known
// (a message decoded from a frame holds views of the whole frame), else its payload plus
// messageOverhead.
func sizeOf(m *protocol.Message, raw int) int {
	if raw > 0 {
		return raw
	}
	return len(m.Message.Payload) + messageOverhead
}

// reserve takes room for m from p (raw is its size as received, 0 when unknown) and returns
// the bytes reserved, to be given to add or back to unreserve. It refuses with
// RATE_LIMITED when the inbox is full or p holds its whole share, so that the sender keeps
// the message and retries rather than the node drop it.
func (ib *Inbox) reserve(m *protocol.Message, p peer.ID, raw int) (int, error) {
	size := sizeOf(m, raw)
	ib.mu.Lock()
	defer ib.mu.Unlock()
	if ib.byPeer[p]+size > ib.perPeer {
		return 0, &protocol.Error{Code: protocol.CodeRateLimited, RetryAfter: 5 * time.Second, Message: fmt.Sprintf(
			"the agent's inbox holds %d bytes from peer %s, its share of %d; retry once the agent has taken them", ib.byPeer[p], p, ib.perPeer)}
	}
	if ib.bytes+size > ib.maxBytes {
		return 0, &protocol.Error{Code: protocol.CodeRateLimited, Message: "the agent's inbox is full; it has not taken its messages", RetryAfter: 5 * time.Second}
	}
	ib.bytes += size
	ib.byPeer[p] += size
	return size, nil
}

// unreserve gives back a reservation that was not used.
func (ib *Inbox) unreserve(p peer.ID, size int) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.releaseLocked(p, size)
}

func (ib *Inbox) releaseLocked(p peer.ID, size int) {
	ib.bytes -= size
	if ib.byPeer[p] -= size; ib.byPeer[p] <= 0 {
		delete(ib.byPeer, p)
	}
}

// add queues m from p on the room reserved for it. A message whose id already waits (offered
// again) is not queued twice: its reservation is given back.
func (ib *Inbox) add(m *protocol.Message, p peer.ID, now time.Time, size int) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	if _, waiting := ib.byID[m.Envelope.MessageID]; waiting {
		ib.releaseLocked(p, size)
		return
	}
	ib.next++
	d := Delivery{Seq: ib.next, Received: now, Peer: p, Msg: m, size: size}
	if ib.read != nil && size >= storedBytes {
		d.Msg, d.load = envelopeOf(m), ib.loader(m.Envelope.MessageID)
	}
	ib.pending = append(ib.pending, d)
	ib.byID[m.Envelope.MessageID] = ib.next
	close(ib.changed)
	ib.changed = make(chan struct{})
}

// List returns the messages not yet taken with Seq greater than after, oldest first.
func (ib *Inbox) List(after uint64) []Delivery { return ib.Page(after, 0) }

// Page returns at most limit (all when limit <= 0) of the messages not yet taken with Seq
// greater than after, oldest first.
func (ib *Inbox) Page(after uint64, limit int) []Delivery {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	i := ib.indexLocked(after + 1)
	n := len(ib.pending) - i - ib.taken // at least the waiting ones among pending[i:]
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]Delivery, 0, max(n, 0))
	for _, d := range ib.pending[i:] {
		if limit > 0 && len(out) == limit {
			break
		}
		if !d.taken {
			out = append(out, d)
		}
	}
	return out
}

// indexLocked returns the index in pending of the first entry with Seq at least seq.
func (ib *Inbox) indexLocked(seq uint64) int {
	i, _ := slices.BinarySearchFunc(ib.pending, seq, func(d Delivery, seq uint64) int { return cmp.Compare(d.Seq, seq) })
	return i
}

// LastSeq returns the Seq of the latest arrival (0 before the first): a reader that wants
// only what arrives from now on lists after it.
func (ib *Inbox) LastSeq() uint64 {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.next
}

// usage returns the bytes the inbox holds and its bound.
func (ib *Inbox) usage() (bytes, max int) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.bytes, ib.maxBytes
}

// Len returns how many messages wait.
func (ib *Inbox) Len() int {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return len(ib.byID)
}

// Changed returns a channel that is closed at the next arrival.
func (ib *Inbox) Changed() <-chan struct{} {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.changed
}

// Wait blocks until a message with Seq greater than after waits, or ctx ends.
func (ib *Inbox) Wait(ctx context.Context, after uint64) ([]Delivery, error) {
	for {
		ch := ib.Changed()
		if ds := ib.List(after); len(ds) > 0 {
			return ds, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Ack marks the message taken and removes it. Acknowledging an unknown id is an error that
// says so (it was taken already, or never came).
func (ib *Inbox) Ack(messageID string) error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	seq, ok := ib.byID[messageID]
	if !ok {
		return fmt.Errorf("message %s is not in the inbox (already taken, or never received)", messageID)
	}
	if ib.onAck != nil {
		if err := ib.onAck(messageID); err != nil {
			return err
		}
	}
	d := &ib.pending[ib.indexLocked(seq)]
	ib.releaseLocked(d.Peer, d.size)
	delete(ib.byID, messageID)
	d.taken, d.Msg = true, nil
	ib.taken++
	ib.compactLocked()
	return nil
}

// compactLocked drops taken entries from pending: those in front at once (the agent takes
// its messages mostly in order), all of them when they are half of it. Each entry is moved
// at most once per halving, so an acknowledgement costs constant time on average.
func (ib *Inbox) compactLocked() {
	front := 0
	for front < len(ib.pending) && ib.pending[front].taken {
		front++
	}
	if front > 0 {
		clear(ib.pending[:front]) // what the array still holds must not keep anything alive
		ib.pending, ib.taken = ib.pending[front:], ib.taken-front
	}
	if ib.taken > 64 && ib.taken*2 > len(ib.pending) {
		kept := slices.DeleteFunc(ib.pending, func(d Delivery) bool { return d.taken })
		ib.pending = slices.Clip(kept)
		ib.taken = 0
	}
}

// envelopeOf is what the inbox keeps of a message it leaves on disk: the envelope without its
// unknown members, the type and the intent, none of which holds on to the frame the message
// was decoded from.
func envelopeOf(m *protocol.Message) *protocol.Message {
	e := &protocol.Message{Envelope: m.Envelope, Message: protocol.Body{Type: m.Message.Type, Intent: m.Message.Intent}}
	e.Envelope.Extra, e.Envelope.Sender.Extra, e.Envelope.Recipient.Extra = nil, nil, nil
	return e
}

// ErrTaken is Delivery.Message's answer for a message the agent took meanwhile.
var ErrTaken = errors.New("the agent took this message already")

// loader returns what reads the message id from the store, whole.
func (ib *Inbox) loader(id string) func() (*protocol.Message, error) {
	read := ib.read
	return func() (*protocol.Message, error) {
		raw, err := read(id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("message %s: %w", id, ErrTaken)
		}
		if err != nil {
			return nil, fmt.Errorf("message %s: %w", id, err)
		}
		return protocol.DecodeJSONShared(raw) // raw is the store's, and nobody changes it
	}
}
