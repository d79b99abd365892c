package pubsub

import (
	"fmt"
	"time"
)

// evictOldest drops the row heard from longest ago, to make room for a new agent.
func (l *Liveness) evictOldest(now time.Time) Transition {
	a := l.oldest
	tr := l.move(a, StateGone, now, fmt.Sprintf("the liveness table is full (%d agents); silent for %s, the longest",
		l.cfg.MaxAgents, now.Sub(a.LastSeen).Round(time.Second)))
	l.remove(a)
	l.evicted++
	return tr
}

// remove drops a row from the table, the peer index and the order of LastSeen.
func (l *Liveness) remove(a *AgentState) {
	delete(l.agents, a.AgentID)
	l.unindex(a)
	l.unlink(a)
}

// touch moves a row to the newest end of the order of LastSeen. Observe calls it whenever it
// sets LastSeen to now, and callers pass a now that does not go back, so the list stays
// sorted by LastSeen.
func (l *Liveness) touch(a *AgentState) {
	if l.newest == a {
		return
	}
	l.unlink(a)
	a.older = l.newest
	if l.newest != nil {
		l.newest.newer = a
	}
	l.newest = a
	if l.oldest == nil {
		l.oldest = a
	}
}

func (l *Liveness) unlink(a *AgentState) {
	if a.older != nil {
		a.older.newer = a.newer
	} else if l.oldest == a {
		l.oldest = a.newer
	}
	if a.newer != nil {
		a.newer.older = a.older
	} else if l.newest == a {
		l.newest = a.older
	}
	a.older, a.newer = nil, nil
}

// index and unindex keep byPeer in step with the rows' PeerID: a peer's rows are a chain linked
// both ways, no map per row, and dropping one is one step however many agents a peer claims.
func (l *Liveness) index(a *AgentState) {
	if next := l.byPeer[a.PeerID]; next != nil {
		a.peerNext, next.peerPrev = next, a
	}
	l.byPeer[a.PeerID] = a
}

func (l *Liveness) unindex(a *AgentState) {
	switch {
	case a.peerPrev != nil:
		a.peerPrev.peerNext = a.peerNext
	case l.byPeer[a.PeerID] != a: // a new row, in no chain
	case a.peerNext != nil:
		l.byPeer[a.PeerID] = a.peerNext
	default:
		delete(l.byPeer, a.PeerID)
	}
	if a.peerNext != nil {
		a.peerNext.peerPrev = a.peerPrev
	}
	a.peerPrev, a.peerNext = nil, nil
}
