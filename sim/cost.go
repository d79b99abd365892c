package sim

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/sim/internal/mocknet"
)

// The CPU cost model (docs/sim.md, "The CPU cost model"). In virtual time the CPU costs
// nothing: a node verifies a thousand signatures in no time, and a latency is the links' and
// the timers' alone. The model charges virtual time for the work a node does, as if each node
// had one core of its own: a signature verified, and each message a node sends or receives,
// with its bytes. Each node's core keeps a calendar of when it is busy; a charge takes the
// first free moment at or after the work is due, so that work piles up behind a busy node as
// it would on its own machine. A charge never makes a goroutine wait (one that holds a lock
// while it waits for virtual time freezes the bubble: synctest does not count a goroutine
// waiting on a mutex as blocked): a message's charges delay its bytes, on the sender's core
// before the link and on the receiver's after it, and a verification keeps the core busy, so
// that what the node sends after it leaves later. Nothing else is charged: timers, the store
// and the simulator's own work take no virtual time.

// CostSpec is the scenario's cost section: the charges of the CPU cost model, in virtual runs
// only. A field left at 0 takes its default.
type CostSpec struct {
	// Enabled switches the model; default true. false: CPU costs no virtual time.
	Enabled *bool `yaml:"enabled"`
	// Verify is charged per signature a node verifies (every node is charged its own check,
	// although the nodes of one process share a verification cache). Default
	// DefaultVerifyCost.
	Verify Duration `yaml:"verify"`
	// Message is charged per message (one write on a stream) to its sender and again to its
	// receiver. Default DefaultMessageCost.
	Message Duration `yaml:"message"`
	// KiB is charged per KiB of a message to its sender and again to its receiver. Default
	// DefaultKiBCost.
	KiB Duration `yaml:"kib"`
}

// The default charges, calibrated on the 2-core machine the simulator runs on with the node's
// own code (BenchmarkCostModel, docs/sim.md: 59, 11 and 16 µs on 2026-12-06).
const (
	DefaultVerifyCost  = 60 * time.Microsecond
	DefaultMessageCost = 11 * time.Microsecond
	DefaultKiBCost     = 16 * time.Microsecond
)

// WithoutCostModel switches the CPU cost model off, whatever the scenario's cost section says:
// CPU then costs no virtual time. A real-time run has no model anyway. Default: the
// scenario's (on).
func WithoutCostModel() Option { return func(c *runConfig) error { c.costOff = true; return nil } }

// CostModel is the charges a virtual run made (the report's record of its model).
type CostModel struct {
	VerifyUS  float64 `json:"verify_us"`
	MessageUS float64 `json:"message_us"`
	KiBUS     float64 `json:"kib_us"`
}

// String is the model in one phrase.
func (m *CostModel) String() string {
	return fmt.Sprintf("CPU cost model: %g µs a signature, %g µs a message, %g µs a KiB", m.VerifyUS, m.MessageUS, m.KiBUS)
}

// model is the charges the section asks for, nil when it switches the model off.
func (c CostSpec) model() *CostModel {
	if c.Enabled != nil && !*c.Enabled {
		return nil
	}
	pick := func(d Duration, def time.Duration) float64 {
		if d == 0 {
			return float64(def) / float64(time.Microsecond)
		}
		return float64(d) / float64(time.Microsecond)
	}
	return &CostModel{VerifyUS: pick(c.Verify, DefaultVerifyCost), MessageUS: pick(c.Message, DefaultMessageCost), KiBUS: pick(c.KiB, DefaultKiBCost)}
}

// cpuModel charges the nodes of a virtual run their CPU work. Its cores are fixed when the
// cluster is made (one per slot; an intruder's node has none and is charged nothing).
type cpuModel struct {
	verify, message, perKiB time.Duration
	cores                   map[peer.ID]*core
	total                   atomic.Int64 // ns charged so far, all nodes
}

// newCPUModel returns the model of m for the given peers, or nil when m is nil (no model).
func newCPUModel(m *CostModel, peers []peer.ID) *cpuModel {
	if m == nil {
		return nil
	}
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	cm := &cpuModel{verify: us(m.VerifyUS), message: us(m.MessageUS), perKiB: us(m.KiBUS), cores: make(map[peer.ID]*core, len(peers))}
	for _, p := range peers {
		cm.cores[p] = &core{}
	}
	return cm
}

// charged is the CPU time charged so far (0 without a model).
func (m *cpuModel) charged() time.Duration {
	if m == nil {
		return 0
	}
	return time.Duration(m.total.Load())
}

// schedule is the simulator's mocknet schedule: size bytes written at now by from, which the
// link alone would deliver to to after link, become readable once from's core has sent them
// and to's core has received them.
func (m *cpuModel) schedule(from, to peer.ID, size int, now time.Time, link time.Duration) time.Time {
	work := m.message + time.Duration(int64(m.perKiB)*int64(size)/1024)
	at := now
	if c := m.cores[from]; c != nil {
		at = c.reserve(now, work)
		m.total.Add(int64(work))
	}
	at = at.Add(link)
	if c := m.cores[to]; c != nil {
		at = c.reserve(at, work)
		m.total.Add(int64(work))
	}
	return at
}

// ticked is the schedule of a virtual run's writes: the cost model's (m; the link's latency
// alone when nil), put off to the next multiple of tick (0: the exact time). Virtual time
// moves to the next instant at which something is due once every goroutine waits, and the
// goroutines due at one instant run on all the machine's cores; a grain makes many writes
// due at one instant where each had its own nanosecond.
func ticked(m *cpuModel, tick time.Duration) mocknet.Schedule {
	return func(from, to peer.ID, size int, now time.Time, link time.Duration) time.Time {
		at := now.Add(link)
		if m != nil {
			at = m.schedule(from, to, size, now, link)
		}
		return onTick(at, tick)
	}
}

// onTick returns the first multiple of tick at or after t (t when tick is 0).
func onTick(t time.Time, tick time.Duration) time.Time {
	if tick <= 0 {
		return t
	}
	if g := t.Truncate(tick); g.Before(t) {
		return g.Add(tick)
	}
	return t
}

// chargeVerify returns what charges one verification to the core of the node of pid (nil
// without a model, or for a node without a core). The verifying goroutine does not wait for
// it (it may hold a lock another goroutine waits on, and a goroutine that waits on a mutex
// stops virtual time): the core is busy, so what the node sends next leaves after the check.
func (m *cpuModel) chargeVerify(pid peer.ID) func() {
	if m == nil || m.cores[pid] == nil {
		return nil
	}
	c := m.cores[pid]
	return func() {
		m.total.Add(int64(m.verify))
		c.reserve(time.Now(), m.verify)
	}
}

// maxSpans bounds a core's calendar: past it, work is put after the last span (a node so
// busy queues its work anyway).
const maxSpans = 4096

// core is one node's CPU: the spans of virtual time it is busy from now on, in order and
// apart. Guarded by mu.
type core struct {
	mu   sync.Mutex
	busy []span
}

type span struct{ from, to time.Time }

// reserve books d of the core at t or after, in the first gap that holds it, and returns when
// that work ends.
func (c *core) reserve(t time.Time, d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	k := 0
	for k < len(c.busy) && !c.busy[k].to.After(now) {
		k++
	}
	if k > 0 {
		// Drop the spans past but keep the array: slicing them off made appends allocate.
		c.busy = append(c.busy[:0], c.busy[k:]...)
	}
	i := 0
	if len(c.busy) >= maxSpans {
		i = len(c.busy)
		t = later(t, c.busy[i-1].to)
	}
	for ; i < len(c.busy); i++ {
		s := c.busy[i]
		if !s.from.Before(t.Add(d)) { // the gap before s holds it
			break
		}
		t = later(t, s.to)
	}
	end := t.Add(d)
	c.insert(i, span{t, end})
	return end
}

// insert puts s at index i, merged with the spans it touches.
func (c *core) insert(i int, s span) {
	if i > 0 && !c.busy[i-1].to.Before(s.from) {
		i--
		c.busy[i].to = later(c.busy[i].to, s.to)
	} else {
		c.busy = append(c.busy, span{})
		copy(c.busy[i+1:], c.busy[i:])
		c.busy[i] = s
	}
	for i+1 < len(c.busy) && !c.busy[i+1].from.After(c.busy[i].to) {
		c.busy[i].to = later(c.busy[i].to, c.busy[i+1].to)
		c.busy = append(c.busy[:i+1], c.busy[i+2:]...)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// counts is what the nodes sent and verified so far.
type counts struct{ bytes, writes, verified uint64 }

func (c *cluster) counts() counts {
	return counts{bytes: c.sent.bytes.Load(), writes: c.sent.writes.Load(), verified: c.verified.Load()}
}

// verifierFor is the verifier of the node of pid: the run's shared caches, a count of every
// signature it checks (c.verified: each node's check counts, cached or not) and, with the CPU
// cost model, its charge.
func (c *cluster) verifierFor(pid peer.ID) *protocol.Verifier {
	charge := c.cpu.chargeVerify(pid)
	caches := c.verifier
	if c.ownCaches {
		caches = &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize), Verified: protocol.NewVerifyCache(verifyCacheSize)}
	}
	return &protocol.Verifier{Keys: caches.Keys, Verified: caches.Verified, Charge: func() {
		c.verified.Add(1)
		if charge != nil {
			charge()
		}
	}}
}
