package sim

import (
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/node"
)

// maxTransitions bounds the liveness transitions kept for the report; later ones are counted.
const maxTransitions = 200000

// recorder collects what the nodes observe: receipts of watched broadcasts and group
// messages, liveness transitions, and messages delivered to agents. Observer goroutines and
// handlers write to it; steps read it. Everything is guarded by mu.
type recorder struct {
	start time.Time
	// healthy answers "are observer and subject both up, and on the same side of any
	// partition?" at the moment a suspicion is recorded: if so, the suspicion is false. It
	// must not call back into the recorder.
	healthy func(observer, subject int) bool

	mu          sync.Mutex
	watch       map[string]map[int]time.Time // event type -> node -> first receipt
	trans       []transition
	transOver   int
	falseSusp   int
	delivered   map[string]int // message id -> deliveries, for ids registered by expectDelivery
	dropped     uint64
	unknownSubj int
}

// transition is one liveness transition seen by an observer, about a subject.
type transition struct {
	At       time.Time `json:"-"`
	AtMS     float64   `json:"at_ms"`
	Observer int       `json:"observer"`
	Subject  int       `json:"subject"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Reason   string    `json:"reason"`
}

func newRecorder(start time.Time) *recorder {
	return &recorder{start: start, watch: map[string]map[int]time.Time{}, delivered: map[string]int{}}
}

// expect starts recording receipts of the event (or group message) whose event_type is key.
func (r *recorder) expect(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watch[key] = map[int]time.Time{}
}

// heard records that node i received key at t.
func (r *recorder) heard(key string, i int, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.watch[key]; ok {
		if _, dup := m[i]; !dup {
			m[i] = t
		}
	}
}

// receipts returns a copy of who received key and when, and stops watching it when done.
func (r *recorder) receipts(key string, done bool) map[int]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]time.Time, len(r.watch[key]))
	for k, v := range r.watch[key] {
		out[k] = v
	}
	if done {
		delete(r.watch, key)
	}
	return out
}

// transition records tr as seen by observer; subject is -1 for an agent not in the mesh.
// First sightings ("" -> alive) are not kept: every node has one per agent.
func (r *recorder) transition(observer, subject int, tr node.Transition) {
	if tr.From == "" && tr.To == node.StateAlive {
		return
	}
	falseSusp := subject >= 0 && tr.To == node.StateSuspect && r.healthy(observer, subject)
	r.mu.Lock()
	defer r.mu.Unlock()
	if subject < 0 {
		r.unknownSubj++
		return
	}
	if falseSusp {
		r.falseSusp++
	}
	if len(r.trans) >= maxTransitions {
		r.transOver++
		return
	}
	r.trans = append(r.trans, transition{At: tr.At, AtMS: ms(tr.At.Sub(r.start)), Observer: observer, Subject: subject,
		From: string(tr.From), To: string(tr.To), Reason: tr.Reason})
}

// firstTransition returns, per observer, the first transition about subject to a state in
// to that happened at or after since.
func (r *recorder) firstTransition(subject int, since time.Time, to ...node.State) map[int]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int]time.Time{}
	for _, t := range r.trans {
		if t.Subject != subject || t.At.Before(since) {
			continue
		}
		for _, s := range to {
			if t.To == string(s) {
				if _, ok := out[t.Observer]; !ok {
					out[t.Observer] = t.At
				}
			}
		}
	}
	return out
}

// falseSuspicions returns how many suspicions so far named an agent that was up and reachable.
func (r *recorder) falseSuspicions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.falseSusp
}

// expectDelivery registers message ids whose delivery to an agent is counted.
func (r *recorder) expectDelivery(ids ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.delivered[id]; !ok {
			r.delivered[id] = 0
		}
	}
}

// deliver counts one delivery of message id to its agent, if the id is registered.
func (r *recorder) deliver(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.delivered[id]; ok {
		r.delivered[id] = n + 1
	}
}

// deliveries returns how many times id arrived.
func (r *recorder) deliveries(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.delivered[id]
}

func (r *recorder) addDropped(n uint64) {
	r.mu.Lock()
	r.dropped += n
	r.mu.Unlock()
}

func (r *recorder) transitions() []transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]transition(nil), r.trans...)
}
