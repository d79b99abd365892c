package pubsub

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Liveness has two tiers (docs/scale.md). The mesh tier is the heartbeat topic: every agent
// beats there, but a large mesh stretches its beats (see meshInterval) so that a node hears
// about MeshBudget beats per interval whatever the size of the mesh; the table then lists the
// whole mesh, each row as fresh as its agent's announced interval. The direct tier is the
// watch set: the agents this node exchanged messages with or discovered, which it probes
// itself every Interval (probe.go) and therefore judges on its own interval, not on their
// stretched mesh beat. A node's steady work per interval is about MeshBudget beats heard plus
// its watched agents and its watchers: it does not grow with the mesh.

// watched is one agent of the watch set.
type watched struct {
	peer   peer.ID
	since  time.Time // when the watch began: silence before it is not held against the agent
	until  time.Time // when the watch lapses unless renewed
	probed time.Time // when the last probe went out
	urgent bool      // probe at the next Due: the connection to its peer dropped
	// refused is when its node last refused the probe protocol: it is then judged by its
	// mesh beats, and asked again after refuseFor (it may have been starting or upgrading).
	refused time.Time
}

// refuseFor is how long an agent whose node refused the probe protocol is not probed, in
// intervals.
const refuseFor = 10

// direct reports whether w is probed at now.
func (l *Liveness) direct(w *watched, now time.Time) bool {
	return w.refused.IsZero() || now.Sub(w.refused) >= refuseFor*l.cfg.Interval
}

// Probe is one agent due for a direct probe.
type Probe struct {
	AgentID string
	PeerID  peer.ID
}

// Watch adds agentID, served by pid, to the watch set or renews its watch until now plus
// WatchFor. When the set is full, the watch that lapses first makes room. The agent's own
// node is never watched.
func (l *Liveness) Watch(agentID string, pid peer.ID, now time.Time) {
	defer func() { // the row is judged on Interval from now on: its deadline may be closer
		if a, ok := l.agents[agentID]; ok {
			l.soon(a, now)
		}
	}()
	if w, ok := l.watch[agentID]; ok {
		if w.peer != pid {
			w.peer, w.refused, w.since = pid, time.Time{}, now
		}
		w.until = now.Add(l.cfg.WatchFor)
		return
	}
	if len(l.watch) >= l.cfg.MaxWatched {
		first := ""
		for id, w := range l.watch {
			if first == "" || w.until.Before(l.watch[first].until) {
				first = id
			}
		}
		l.unwatch(first, now)
	}
	l.watch[agentID] = &watched{peer: pid, since: now, until: now.Add(l.cfg.WatchFor)}
}

// unwatch drops agentID's watch. Its row is then judged on its announced interval from its
// last beat, not from the start of the watch: its deadline may come closer.
func (l *Liveness) unwatch(agentID string, now time.Time) {
	delete(l.watch, agentID)
	if a, ok := l.agents[agentID]; ok {
		l.soon(a, now)
	}
}

// Watched reports whether agentID is in the watch set and probed at now.
func (l *Liveness) Watched(agentID string, now time.Time) bool {
	w, ok := l.watch[agentID]
	return ok && l.direct(w, now)
}

// WatchCount returns the size of the watch set.
func (l *Liveness) WatchCount() int { return len(l.watch) }

// Unprobeable records that agentID's node refused the probe protocol at now (an older node,
// another implementation, one starting): it stays watched, judged by its mesh beats, and is
// probed again after refuseFor intervals.
func (l *Liveness) Unprobeable(agentID string, now time.Time) {
	if w, ok := l.watch[agentID]; ok {
		w.refused = now
		if a, ok := l.agents[agentID]; ok {
			l.soon(a, now) // judged from its last beat now, not from the start of the watch
		}
	}
}

// Due drops the watches that lapsed and returns at most limit agents to probe now: those
// watched directly that nothing was heard from, nor probed, within Interval. It marks them
// probed.
func (l *Liveness) Due(now time.Time, limit int) []Probe {
	var out []Probe
	for id, w := range l.watch {
		if now.After(w.until) {
			l.unwatch(id, now)
			continue
		}
		if !l.direct(w, now) {
			continue
		}
		w.refused = time.Time{} // asked again after refuseFor

		last := w.probed
		if a, ok := l.agents[id]; ok && a.PeerID == w.peer && a.LastSeen.After(last) {
			last = a.LastSeen
		}
		if (w.urgent || now.Sub(last) >= l.cfg.Interval) && len(out) < limit {
			w.probed, w.urgent = now, false
			out = append(out, Probe{AgentID: id, PeerID: w.peer})
		}
	}
	return out
}

// expect is how often a row's agent is expected to be heard from, and since when its silence
// counts: every Interval for an agent this node probes (from the start of the watch at the
// earliest), its announced interval otherwise.
func (l *Liveness) expect(a *AgentState, now time.Time) (interval time.Duration, from time.Time) {
	if w, ok := l.watch[a.AgentID]; ok && w.peer == a.PeerID && l.direct(w, now) {
		from = a.LastSeen
		if w.since.After(from) {
			from = w.since
		}
		return min(a.Interval, l.cfg.Interval), from
	}
	return a.Interval, a.LastSeen
}

// MedianInterval returns the median of the intervals the agents of the table announced (0
// for an empty table).
func (l *Liveness) MedianInterval() time.Duration {
	if len(l.agents) == 0 {
		return 0
	}
	ivs := make([]time.Duration, 0, len(l.agents))
	for _, a := range l.agents {
		ivs = append(ivs, a.Interval)
	}
	slices.Sort(ivs)
	return ivs[len(ivs)/2]
}
