package pubsub

import (
	"context"
	"log/slog"
	"time"
)

// Health is this node's view of its own timeliness: Lifeguard's Local Health Multiplier
// (hashicorp/memberlist's "awareness"). A node whose own timers run late, whose beats spend
// long in its own gossip queues, or whose own beats cannot be published, hears its peers late
// too, and would suspect them for its own slowness. Each such sign raises Score by one, up to
// MaxScore; ticks on time lower it slowly. While Score is above zero, the silence
// after which an agent becomes suspect is multiplied by Multiplier (Score+1); the stuck and
// forget timeouts are not, so that a slow node still concludes within StuckAfter.
type Health struct {
	Score         int           // 0 (healthy) .. MaxScore
	MaxScore      int           // the saturation (DefaultMaxHealthScore; 0 when turned off)
	Multiplier    int           // Score+1: how many times the usual silence this node waits before suspecting
	LateAfter     time.Duration // a tick later than this is a sign of trouble
	WorstLateness time.Duration // the latest tick among the last 32 to 64 ticks of the node's timers

	LateTicks       uint64 // ticks of the checker or the beat loop later than LateAfter
	OnTimeTicks     uint64 // ticks within LateAfter
	PublishFailures uint64 // own heartbeats that could not be published
	SlowQueues      uint64 // heartbeats (a peer's or our own) that spent longer than LateAfter in this node's gossip queues
	Refuted         uint64 // suspicions withdrawn by a beat sent before them, or within the refute grace after
}

// healthDecayTicks is how many ticks in a row must come on time to lower the score by one:
// with the checker's quarter-beat ticks (at most 1 s), 0.5 s per step at the simulator's 1 s
// beat and 2 s at 4 s beats or more, so a full score decays in 4 to 16 s once the node is
// well again (memberlist lowers its own by one per successful probe, once a second). Slower
// decay kept nodes lenient long after an overload had passed: in the 100-node simulation, a
// crash right after a busy step went undetected by a tenth of the nodes for 30 s. Any sign of
// trouble starts the count again, so a node that is late every other tick stays up.
const healthDecayTicks = 2

// healthWindow is half the span, in ticks, over which WorstLateness is kept: the worst of the
// current and the previous window of 32 ticks, about 6 to 13 s at 1 s beats.
const healthWindow = 32

// localHealth is the Local Health Multiplier's state machine. Like Liveness, which owns it, it
// reads no clock and starts nothing: the caller reports ticks with their scheduled and actual
// times, and the other signs as they happen.
type localHealth struct {
	max       int           // 0: off, the score stays 0
	lateAfter time.Duration // a tick later than this raises the score
	score     int
	onTimeRun int              // on-time ticks since the last change of the score or sign of trouble
	worst     [2]time.Duration // worst lateness of the previous and the current window
	inWindow  int              // ticks in the current window
	counts    Health           // the counters only
}

// tick records one tick of a periodic timer, scheduled for scheduled and run at actual.
func (h *localHealth) tick(scheduled, actual time.Time) {
	late := max(actual.Sub(scheduled), 0)
	if h.inWindow == healthWindow {
		h.worst[0], h.worst[1], h.inWindow = h.worst[1], 0, 0
	}
	h.inWindow++
	h.worst[1] = max(h.worst[1], late)
	if late > h.lateAfter {
		h.counts.LateTicks++
		h.raise()
		return
	}
	h.counts.OnTimeTicks++
	if h.onTimeRun++; h.onTimeRun == healthDecayTicks {
		h.onTimeRun = 0
		h.score = max(h.score-1, 0)
	}
}

// publishFailed records that one of our own heartbeats could not be published.
func (h *localHealth) publishFailed() {
	h.counts.PublishFailures++
	h.raise()
}

// queued records that a heartbeat spent d in this node's own gossip queues (between
// arriving, or being published, and reaching our subscription). Longer than lateAfter is a
// sign of trouble; shorter is not counted either way, so that the decay keeps the pace of
// the timers' ticks.
func (h *localHealth) queued(d time.Duration) {
	if d > h.lateAfter {
		h.counts.SlowQueues++
		h.raise()
	}
}

// refuted records that an agent we suspected beat again with a beat sent before the
// suspicion (or within the refute grace after it). It is counted, and it does not raise the
// score: the beat's timestamp is the agent's to choose, so an agent (or many throwaway ones)
// could back-date beats to keep every node's score high and every crash detected late. The
// score moves on local signs only, which no peer controls.
func (h *localHealth) refuted() {
	h.counts.Refuted++
}

func (h *localHealth) raise() {
	h.onTimeRun = 0
	h.score = min(h.score+1, h.max)
}

// multiplier is what the suspect timeouts are multiplied by.
func (h *localHealth) multiplier() int { return h.score + 1 }

func (h *localHealth) snapshot() Health {
	out := h.counts
	out.Score, out.MaxScore, out.Multiplier = h.score, h.max, h.multiplier()
	out.LateAfter, out.WorstLateness = h.lateAfter, max(h.worst[0], h.worst[1])
	return out
}

// Health returns this node's local health: the score that scales its suspect timeouts, and
// the signs that moved it. The node reports it in its status and metrics.
func (g *Gossip) Health() Health {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	return g.live.Health()
}

// ticked records one tick (what, for the log) of the checker or the beat loop, due at
// scheduled (the ticker's value) and run at actual (time.Now()). Tests pass the times they
// choose.
func (g *Gossip) ticked(what string, scheduled, actual time.Time) {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	before := g.live.health.score
	g.live.Ticked(scheduled, actual)
	if g.live.health.score > before {
		g.healthChangedLocked(what + " ran " + actual.Sub(scheduled).Round(time.Millisecond).String() + " late")
	} else {
		g.healthChangedLocked("timer ticks on time")
	}
}

// queued records that a heartbeat spent d in this node's gossip queues (what, for the log).
func (g *Gossip) queued(what string, d time.Duration) {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	g.live.Queued(d)
	g.healthChangedLocked(what + " took " + d.Round(time.Millisecond).String())
}

// publishFailed records that one of our own beats could not be published.
func (g *Gossip) publishFailed() {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	g.live.PublishFailed()
	g.healthChangedLocked("a heartbeat of ours could not be published")
}

// healthChangedLocked logs a change of the local health score since the last one logged: a
// rise as a warning, the return to zero as information; the caller holds stateMu.
func (g *Gossip) healthChangedLocked(why string) {
	score, was := g.live.health.score, g.healthScore
	if score == was {
		return
	}
	g.healthScore = score
	level := slog.LevelDebug
	switch {
	case score > was:
		level = slog.LevelWarn
	case score == 0:
		level = slog.LevelInfo
	}
	h := g.live.Health()
	g.log.Log(context.Background(), level, "local health changed: suspect timeouts scaled", "score", score, "was", was,
		"multiplier", h.Multiplier, "why", why, "worst_lateness", h.WorstLateness, "late_ticks", h.LateTicks,
		"publish_failures", h.PublishFailures, "refuted", h.Refuted)
}
