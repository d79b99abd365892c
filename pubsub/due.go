package pubsub

import "time"

// When Tick must next visit the rows of a liveness table: the earliest deadline of any row as
// of its last visit (Liveness.next, with the health multiplier that visit used), lowered by
// whatever brought a row's deadline closer since. A higher multiplier never brings one closer
// (it stretches the suspicion timeouts), so only a lower one makes Tick visit at once.

// due is when Tick's rules next change a's row with the health multiplier k: the rules of
// Tick's switch, as times. It counts the moment a watched agent becomes probed again (its
// expected interval shortens then).
func (l *Liveness) due(a *AgentState, now time.Time, k time.Duration) time.Time {
	iv, from := l.expect(a, now)
	stuck := max(l.cfg.StuckAfter, time.Duration(l.cfg.SuspectAfter+1)*a.Interval)
	t := a.LastSeen.Add(max(l.cfg.ForgetAfter, 2*stuck))
	if a.State == StateOffline || a.State == StateStuck {
		return t
	}
	t = earlier(t, a.LastSeen.Add(stuck))
	if a.State != StateSuspect {
		t = earlier(t, from.Add(k*time.Duration(l.cfg.SuspectAfter)*iv))
		if l.hinted(a, iv) {
			t = earlier(t, from.Add(k*lostAfter(iv)))
		}
	}
	if w, ok := l.watch[a.AgentID]; ok && !l.direct(w, now) {
		t = earlier(t, w.refused.Add(refuseFor*l.cfg.Interval))
	}
	return t
}

// soon lowers the time of Tick's next visit to a's deadline, after something that may have
// brought it closer (a beat: a new row, a shorter interval, a state that beats again).
func (l *Liveness) soon(a *AgentState, now time.Time) {
	if l.next.IsZero() {
		return // a visit is due anyway
	}
	l.next = earlier(l.next, l.due(a, now, l.nextK))
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// noteCloser notes that a's deadline came closer at a moment Tick's clock is not known (a lost
// connection): the next Tick lowers its visit time to a's deadline (takeNoted). Until
// 2026-11-28 a lost connection made the next Tick visit every row, as did any change of the
// health multiplier: on a node whose ticks run late, in a mesh past its connection limit where
// connections are trimmed all the time, that can be most Ticks (BenchmarkLivenessTick models
// one such second).
func (l *Liveness) noteCloser(a *AgentState) {
	if l.next.IsZero() || a.noted {
		return // a visit is due anyway, or a is noted already
	}
	a.noted = true
	l.pending = append(l.pending, a)
}

// takeNoted lowers the time of Tick's next visit to the deadlines of the rows noteCloser noted.
func (l *Liveness) takeNoted(now time.Time) {
	for i, a := range l.pending {
		a.noted = false
		if l.agents[a.AgentID] == a {
			l.soon(a, now)
		}
		l.pending[i] = nil
	}
	l.pending = l.pending[:0]
}
