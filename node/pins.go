package node

import (
	"container/list"

	"github.com/libp2p/go-libp2p/core/peer"
)

// maxPinsPerPeer bounds the agent ids one peer may be pinned to under trust on first use: a
// node serves one agent, a gateway a few dozen. A peer that already speaks for this many is
// refused a new one (IDENTITY_INVALID), so that no peer can fill the table with ids it made
// up and push out the pins of the agents that speak for themselves.
const maxPinsPerPeer = 64

// pinTable holds the trust-on-first-use pins: agent id to the peer first accepted for it.
// Each peer holds at most perPeer pins; when the table holds max, the peer holding the most
// pins loses the one it used least recently, so that a flood of new ids spread over many
// peers costs those peers their own pins first. It is not safe for concurrent use: the
// trustStore guards it.
type pinTable struct {
	max, perPeer int
	pins         map[string]*pinEntry
	peers        map[peer.ID]*list.List // each peer's pins, most recently used first
	clock        uint64                 // counts uses, to order the pins of equal peers
}

type pinEntry struct {
	agent string
	peer  peer.ID
	used  uint64
	elem  *list.Element
}

func newPinTable(max, perPeer int) *pinTable {
	return &pinTable{max: max, perPeer: perPeer, pins: make(map[string]*pinEntry), peers: make(map[peer.ID]*list.List)}
}

// get returns the peer agent is pinned to, without counting it as a use.
func (t *pinTable) get(agent string) (peer.ID, bool) {
	e, ok := t.pins[agent]
	if !ok {
		return "", false
	}
	return e.peer, true
}

// full reports whether p holds as many pins as a peer may.
func (t *pinTable) full(p peer.ID) bool {
	l := t.peers[p]
	return l != nil && l.Len() >= t.perPeer
}

// use counts a use of agent's pin (an accepted message), or pins it to p when it has none
// and p may hold one more. It reports whether the table changed (a pin added or evicted).
func (t *pinTable) use(agent string, p peer.ID) (changed bool) {
	t.clock++
	if e, ok := t.pins[agent]; ok {
		if e.peer == p {
			e.used = t.clock
			t.peers[p].MoveToFront(e.elem)
		}
		return false
	}
	if t.full(p) {
		return false
	}
	if len(t.pins) >= t.max {
		t.evict()
	}
	l := t.peers[p]
	if l == nil {
		l = list.New()
		t.peers[p] = l
	}
	e := &pinEntry{agent: agent, peer: p, used: t.clock}
	e.elem = l.PushFront(e)
	t.pins[agent] = e
	return true
}

// evict forgets the least recently used pin of the peer holding the most (of equals, the one
// whose least recent pin is oldest). It visits every peer, only when the table is full.
func (t *pinTable) evict() {
	var victim *list.List
	for _, l := range t.peers {
		if victim == nil || l.Len() > victim.Len() ||
			l.Len() == victim.Len() && l.Back().Value.(*pinEntry).used < victim.Back().Value.(*pinEntry).used {
			victim = l
		}
	}
	if victim == nil {
		return
	}
	e := victim.Remove(victim.Back()).(*pinEntry)
	delete(t.pins, e.agent)
	if victim.Len() == 0 {
		delete(t.peers, e.peer)
	}
}

func (t *pinTable) len() int { return len(t.pins) }

// each calls fn for every pin.
func (t *pinTable) each(fn func(agent string, p peer.ID)) {
	for a, e := range t.pins {
		fn(a, e.peer)
	}
}
