package pubsub

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// lostAfter is when, after its last beat, an agent whose connection dropped is suspect: an
// interval for the next beat and half of one for it to travel.
func lostAfter(interval time.Duration) time.Duration { return interval + interval/2 }

// hinted says whether a's lost connection counts against it, a being expected every iv: when
// a is watched (and probed at once when its connection drops) or beats at the base pace, or
// when the mesh is no larger than ConnHigh, so that no connection manager trims. Otherwise
// connections are trimmed all the time, and one beat lost in gossip after a trim made false
// suspicions (docs/gossip.md): a is judged by its silence alone.
func (l *Liveness) hinted(a *AgentState, iv time.Duration) bool {
	return a.lost && (iv <= l.cfg.Interval || len(l.agents) < l.cfg.ConnHigh)
}

// Tick applies the silence rules at now: suspect after SuspectAfter expected beats (or 1.5
// after a lost connection, see hinted), both multiplied by the local health multiplier (see
// Health); stuck after StuckAfter and gone after ForgetAfter, which are not scaled. A watched
// agent is expected every Interval (it is probed), any other at its announced interval (see
// expect); an agent whose announced beat is so slow that StuckAfter would come before its
// suspicion is stuck one beat after it, and forgotten after twice that. Call Tick at least
// every fraction of a beat. The transitions come ordered by agent id.
//
// Tick visits every row only when one may be due: a visit notes the earliest deadline of any
// row (see due), and until then, unless a beat, a lost connection, a watch or a lower health
// multiplier brought one closer, Tick returns at once (due.go). In a large mesh most rows are
// due minutes apart, and a node ticks every second.
func (l *Liveness) Tick(now time.Time) []Transition {
	k := time.Duration(l.health.multiplier())
	l.takeNoted(now)
	if !l.next.IsZero() && k >= l.nextK && now.Before(l.next) {
		return nil // a higher multiplier only puts deadlines later
	}
	var out []Transition
	next := now.Add(l.cfg.Interval) // at least once a beat, whatever the rows say
	defer func() { l.next, l.nextK = next, k }()
	why := ""
	if k > 1 {
		why = fmt.Sprintf(" (waited %dx: this node's local health score is %d)", k, k-1)
	}
	for _, a := range l.agents {
		silent := now.Sub(a.LastSeen)
		iv, from := l.expect(a, now)
		quiet := now.Sub(from)
		stuck := max(l.cfg.StuckAfter, time.Duration(l.cfg.SuspectAfter+1)*a.Interval)
		switch {
		case silent >= max(l.cfg.ForgetAfter, 2*stuck):
			out = append(out, l.move(a, StateGone, now, "silent for "+silent.Round(time.Second).String()))
			l.remove(a)
		case a.State == StateOffline || a.State == StateStuck:
		case silent >= stuck:
			out = append(out, l.move(a, StateStuck, now, "no heartbeat for "+silent.Round(time.Second).String()))
		case a.State != StateSuspect && quiet >= k*time.Duration(l.cfg.SuspectAfter)*iv:
			out = append(out, l.move(a, StateSuspect, now, "missed heartbeats"+why))
		case a.State != StateSuspect && l.hinted(a, iv) && quiet >= k*lostAfter(iv):
			out = append(out, l.move(a, StateSuspect, now, "connection lost, no heartbeat since"+why))
		}
		if _, kept := l.agents[a.AgentID]; kept {
			next = earlier(next, l.due(a, now, k))
		}
	}
	slices.SortFunc(out, func(x, y Transition) int { return strings.Compare(x.AgentID, y.AgentID) })
	return out
}

func (l *Liveness) move(a *AgentState, to State, now time.Time, reason string) Transition {
	tr := Transition{AgentID: a.AgentID, PeerID: a.PeerID, From: a.State, To: to, At: now, Reason: reason}
	a.State, a.lost = to, false
	if to == StateSuspect {
		a.suspected = now
	}
	return tr
}
