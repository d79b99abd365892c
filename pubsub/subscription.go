package pubsub

import (
	"slices"
	"sync/atomic"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Kind says what an Item carries.
type Kind int

// Item kinds.
const (
	KindEvent      Kind = iota + 1 // an event from the broadcast topic; Event is set
	KindGroup                      // a message to one of our groups; Group is set
	KindHeartbeat                  // a heartbeat; Heartbeat is set
	KindTransition                 // a local liveness transition; Transition is set, Message is nil
)

func (k Kind) String() string {
	switch k {
	case KindEvent:
		return "event"
	case KindGroup:
		return "group"
	case KindHeartbeat:
		return "heartbeat"
	case KindTransition:
		return "transition"
	}
	return "unknown"
}

// Item is one thing a Subscription delivers. Every subscriber receives the same *Item, and
// Message is the verified IACP document: read them, do not modify them (Clone the message
// first).
type Item struct {
	Kind       Kind
	Message    *protocol.Message
	Author     peer.ID // the pubsub author, equal to Message.Envelope.Sender.PeerID
	Event      protocol.EventPayload
	Group      string // the capability of a KindGroup item
	Heartbeat  protocol.HeartbeatPayload
	Transition Transition
}

// Filter selects items. The zero Filter selects everything.
type Filter struct {
	Kinds   []Kind // empty: every kind
	Group   string // non-empty: only KindGroup items of this capability (other kinds pass)
	AgentID string // non-empty: only items from or about this agent
}

func (f Filter) match(it *Item) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, it.Kind) {
		return false
	}
	if f.Group != "" && it.Kind == KindGroup && it.Group != f.Group {
		return false
	}
	if f.AgentID != "" {
		id := it.Transition.AgentID
		if it.Message != nil {
			id = it.Message.Envelope.Sender.AgentID
		}
		if id != f.AgentID {
			return false
		}
	}
	return true
}

// Subscription delivers the items that match its filter through a bounded channel (or to
// its consumer's own queue: SubscribeFunc). A consumer that falls behind loses items
// (counted by Dropped); it never blocks the node.
type Subscription struct {
	g       *Gossip
	filter  Filter
	ch      chan *Item
	take    func(*Item) bool // SubscribeFunc's offer, instead of ch
	ended   func()           // SubscribeFunc's ended, instead of closing ch
	dropped atomic.Uint64
	done    bool // guarded by g.stateMu
}

// C returns the channel of items (nil for a SubscribeFunc). It is closed by Cancel and by
// Gossip.Close.
func (s *Subscription) C() <-chan *Item { return s.ch }

// Dropped returns how many items were lost because the channel was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Cancel stops the subscription and closes its channel. It is safe to call twice.
func (s *Subscription) Cancel() {
	s.g.stateMu.Lock()
	defer s.g.stateMu.Unlock()
	s.cancelLocked()
}

func (s *Subscription) cancelLocked() {
	if s.done {
		return
	}
	s.done = true
	delete(s.g.subs, s)
	if s.ended != nil {
		s.ended()
		return
	}
	close(s.ch)
}

// offer sends it without blocking; the caller holds g.stateMu.
func (s *Subscription) offer(it *Item) {
	if !s.filter.match(it) {
		return
	}
	if s.take != nil {
		if !s.take(it) {
			s.dropped.Add(1)
		}
		return
	}
	select {
	case s.ch <- it:
	default:
		s.dropped.Add(1)
	}
}

// Subscribe returns a subscription to the items that match f, with a channel of bufSize
// items (DefaultBufferSize when bufSize <= 0). Cancel it when done.
func (g *Gossip) Subscribe(f Filter, bufSize int) (*Subscription, error) {
	if bufSize <= 0 {
		bufSize = DefaultBufferSize
	}
	return g.subscribe(&Subscription{g: g, filter: f, ch: make(chan *Item, bufSize)})
}

// SubscribeFunc is Subscribe for a consumer that keeps its own bounded queue (of a type of
// its own, say): offer is called with each item that matches f, under the gossip's lock, so
// it must not block; it reports whether it took the item (false counts it in Dropped). ended
// is called once, when the subscription ends (Cancel or Close); offer is not called after
// it. The subscription's C is nil.
func (g *Gossip) SubscribeFunc(f Filter, offer func(*Item) bool, ended func()) (*Subscription, error) {
	return g.subscribe(&Subscription{g: g, filter: f, take: offer, ended: ended})
}

func (g *Gossip) subscribe(s *Subscription) (*Subscription, error) {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	g.subs[s] = struct{}{}
	return s, nil
}

// publishLocal offers it to every subscriber; the caller holds g.stateMu.
func (g *Gossip) publishLocal(it *Item) {
	for s := range g.subs {
		s.offer(it)
	}
}
