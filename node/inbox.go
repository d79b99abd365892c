package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// Delivery is one inbound message waiting in the inbox for the agent to take it.
type Delivery struct {
	// Seq orders deliveries by arrival; it only grows.
	Seq      uint64            `json:"seq"`
	Received time.Time         `json:"received"`
	Peer     peer.ID           `json:"peer"`
	Msg      *protocol.Message `json:"message"`

	size int // what it counts against the inbox's bounds
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
type Inbox struct {
	mu       sync.Mutex
	next     uint64
	pending  []Delivery // in Seq order
	bytes    int
	maxBytes int
	perPeer  int
	byPeer   map[peer.ID]int
	changed  chan struct{}
	// onAck, when set, is told that the agent took a message (the durable store forgets it).
	onAck func(messageID string) error
}

// DefaultInboxBytes bounds the in-memory inbox: 256 MiB of messages not yet taken.
const DefaultInboxBytes = 256 << 20

// messageOverhead is what a message counts against the inbox beyond its payload: its
// envelope and the bookkeeping around it.
const messageOverhead = 1024

func newInbox(maxBytes, perPeer int) *Inbox {
	return &Inbox{maxBytes: maxBytes, perPeer: perPeer, byPeer: make(map[peer.ID]int), changed: make(chan struct{})}
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
	for _, d := range ib.pending {
		if d.Msg.Envelope.MessageID == m.Envelope.MessageID {
			ib.releaseLocked(p, size)
			return
		}
	}
	ib.next++
	ib.pending = append(ib.pending, Delivery{Seq: ib.next, Received: now, Peer: p, Msg: m, size: size})
	close(ib.changed)
	ib.changed = make(chan struct{})
}

// List returns the messages not yet taken with Seq greater than after, oldest first.
func (ib *Inbox) List(after uint64) []Delivery {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	out := make([]Delivery, 0, len(ib.pending))
	for _, d := range ib.pending {
		if d.Seq > after {
			out = append(out, d)
		}
	}
	return out
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
	return len(ib.pending)
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
	for i, d := range ib.pending {
		if d.Msg.Envelope.MessageID != messageID {
			continue
		}
		if ib.onAck != nil {
			if err := ib.onAck(messageID); err != nil {
				return err
			}
		}
		ib.releaseLocked(d.Peer, d.size)
		ib.pending = append(ib.pending[:i], ib.pending[i+1:]...)
		return nil
	}
	return fmt.Errorf("message %s is not in the inbox (already taken, or never received)", messageID)
}
