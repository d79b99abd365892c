package api

import (
	"time"

	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/node"
)

// hookPlan decides when the webhook posts each inbox message. It does no I/O, owns no
// goroutine and reads no clock: the webhook loop gives it the inbox listing and the time,
// posts what it returns and reports each outcome. Every message has its own schedule
// (exponential backoff with jitter, no attempt limit), at most `slots` posts are in flight,
// and a schedule lives only as long as its message is in the inbox, so that the inbox bounds
// the plan's memory. It is owned by the webhook loop.
type hookPlan struct {
	min, max time.Duration
	slots    int
	// rnd returns a uniform draw from [0, n): the jitter.
	rnd      func(n int64) int64
	sched    map[string]*hookState // by message id
	inflight int
	pass     uint64 // counts passes; a schedule not seen in the latest one is forgotten
}

// hookState is the schedule of one message.
type hookState struct {
	attempts int       // failed posts so far
	next     time.Time // no post before this; zero: at once
	posting  bool
	seen     uint64 // the last pass that listed the message
}

// hookWork is what one pass asks of the loop.
type hookWork struct {
	// post is what to post now, oldest first; each is in flight until done is called.
	post []node.Delivery
	// expired is what expired before the agent took it: acknowledge it, never post it.
	expired []node.Delivery
	// wake is when to pass again at the latest (zero: at the next arrival or outcome).
	wake time.Time
}

func newHookPlan(min, max time.Duration, slots int, rnd func(int64) int64) *hookPlan {
	return &hookPlan{min: min, max: max, slots: slots, rnd: rnd, sched: map[string]*hookState{}}
}

// next takes the inbox listing (oldest first) at time now and says what to do: post the
// messages that are due while slots are free, acknowledge the expired ones, and forget the
// schedules of messages that left the inbox (the agent took them some other way).
func (p *hookPlan) next(ds []node.Delivery, now time.Time) hookWork {
	p.pass++
	var w hookWork
	for _, d := range ds {
		id := d.Msg.Envelope.MessageID
		st := p.sched[id]
		if st == nil {
			st = &hookState{}
			p.sched[id] = st
		}
		st.seen = p.pass
		if st.posting {
			continue
		}
		exp := d.Msg.Expires()
		if !now.Before(exp) {
			w.expired = append(w.expired, d)
			delete(p.sched, id)
			continue
		}
		if !st.next.After(now) {
			if p.inflight < p.slots {
				st.posting = true
				p.inflight++
				w.post = append(w.post, d)
			}
			continue // due without a free slot: an outcome frees one and wakes the loop
		}
		w.wake = earliest(w.wake, st.next)
		w.wake = earliest(w.wake, exp)
	}
	for id, st := range p.sched {
		if st.seen != p.pass && !st.posting {
			delete(p.sched, id)
		}
	}
	return w
}

// done records the outcome of a post of id at time now. A taken message is forgotten; a
// failed one is due again after a backoff, which done returns with the failures so far.
func (p *hookPlan) done(id string, taken bool, now time.Time) (attempts int, wait time.Duration) {
	st := p.sched[id]
	if st == nil || !st.posting {
		return 0, 0
	}
	st.posting = false
	p.inflight--
	if taken {
		delete(p.sched, id)
		return 0, 0
	}
	st.attempts++
	// min*2^(attempts-1) capped at max, less an "equal jitter" draw of up to half of it, never
	// below min: retries of many messages spread out, yet none comes sooner than min or later
	// than max.
	wait = retry.Backoff{Min: p.min, Max: p.max, AtLeastMin: true}.Delay(st.attempts, p.rnd)
	st.next = now.Add(wait)
	return st.attempts, wait
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
