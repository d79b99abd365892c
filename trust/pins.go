package trust

import (
	"container/list"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// MaxPinsPerPeer bounds the agent ids one peer may be pinned to under trust on first use: a
// node serves one agent, a gateway a few dozen. A peer that already speaks for this many is
// refused a new one (IDENTITY_INVALID), so that no peer can fill the table with ids it made
// up and push out the pins of the agents that speak for themselves.
const MaxPinsPerPeer = 64

// pinTable holds the trust-on-first-use pins: agent id to the peer first accepted for it.
// Each peer holds at most perPeer pins; when the table holds max, a peer holding the most
// pins loses the one it used least recently, so that a flood of new ids spread over many
// peers costs those peers their own pins first. It is not safe for concurrent use: the
// trustStore guards it.
type pinTable struct {
	max, perPeer int
	pins         map[string]*pinEntry
	peers        map[peer.ID]*list.List // each peer's pins, most recently used first
	// byCount[n] holds the peers with n pins (1..perPeer), so that a full table finds a
	// peer holding the most in at most perPeer steps, however many peers (identities cost
	// nothing) hold pins.
	byCount []map[peer.ID]struct{}
}

type pinEntry struct {
	agent string
	peer  peer.ID
	// pinned is when the pin was taken, used when an accepted message last counted as its use.
	pinned, used time.Time
	elem         *list.Element
}

func newPinTable(max, perPeer int) *pinTable {
	t := &pinTable{max: max, perPeer: perPeer, pins: make(map[string]*pinEntry), peers: make(map[peer.ID]*list.List)}
	t.byCount = make([]map[peer.ID]struct{}, perPeer+1)
	for i := range t.byCount {
		t.byCount[i] = make(map[peer.ID]struct{})
	}
	return t
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

// use counts a use of agent's pin at now (an accepted message), or pins it to p when it has
// none and p may hold one more. It reports whether the table changed (a pin added or
// evicted).
func (t *pinTable) use(agent string, p peer.ID, now time.Time) (changed bool) {
	if e, ok := t.pins[agent]; ok {
		if e.peer == p {
			t.peers[p].MoveToFront(e.elem)
			e.used = now
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
	e := &pinEntry{agent: agent, peer: p, pinned: now, used: now}
	e.elem = l.PushFront(e)
	t.pins[agent] = e
	t.recount(p, l.Len()-1, l.Len())
	return true
}

// evict forgets the least recently used pin of a peer holding the most.
func (t *pinTable) evict() {
	for n := t.perPeer; n > 0; n-- {
		for p := range t.byCount[n] {
			t.remove(t.peers[p].Back().Value.(*pinEntry))
			return
		}
	}
}

// remove forgets one pin.
func (t *pinTable) remove(e *pinEntry) {
	l := t.peers[e.peer]
	l.Remove(e.elem)
	delete(t.pins, e.agent)
	t.recount(e.peer, l.Len()+1, l.Len())
	if l.Len() == 0 {
		delete(t.peers, e.peer)
	}
}

// forget removes agent's pin, and reports whether it had one.
func (t *pinTable) forget(agent string) bool {
	e, ok := t.pins[agent]
	if ok {
		t.remove(e)
	}
	return ok
}

// forgetPeer removes every pin held by p, and returns how many.
func (t *pinTable) forgetPeer(p peer.ID) int {
	l := t.peers[p]
	if l == nil {
		return 0
	}
	n := l.Len()
	for l.Len() > 0 {
		t.remove(l.Front().Value.(*pinEntry))
	}
	return n
}

// expire removes the pins last used before cutoff, and returns how many. Each peer's list is
// ordered by use, so it looks at the expired pins and one more per peer.
func (t *pinTable) expire(cutoff time.Time) int {
	n := 0
	for _, l := range t.peers {
		for l.Len() > 0 && l.Back().Value.(*pinEntry).used.Before(cutoff) {
			t.remove(l.Back().Value.(*pinEntry))
			n++
		}
	}
	return n
}

// recount moves p in byCount from holding was pins to holding now.
func (t *pinTable) recount(p peer.ID, was, now int) {
	delete(t.byCount[was], p)
	if now > 0 {
		t.byCount[now][p] = struct{}{}
	}
}

func (t *pinTable) len() int { return len(t.pins) }

// each calls fn for every pin.
func (t *pinTable) each(fn func(e *pinEntry)) {
	for _, e := range t.pins {
		fn(e)
	}
}
