package sim

import (
	"context"
	"crypto/rand"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// A core takes work in the first gap that holds it, at or after the work is due: work due
// now waits behind what the core is doing, work due later fills a gap before later work, and
// touching spans merge.
func TestCore_TakesTheFirstGapThatHoldsTheWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the clock stands still: no span is past
		var c core
		now := time.Now()
		at := func(ms int) time.Time { return now.Add(time.Duration(ms) * time.Millisecond) }
		for i, w := range []struct{ due, work, end int }{ // ms
			{10, 5, 15},  // a free core: done 5 ms after it is due
			{10, 5, 20},  // due while busy: after the first
			{0, 3, 3},    // the gap before them holds it
			{2, 3, 6},    // due at 2, while busy until 3: at 3, in the same gap
			{30, 10, 40}, // later, alone
			{21, 12, 52}, // the gap 21..30 is too short for 12 ms: after 40
		} {
			if got := c.reserve(at(w.due), time.Duration(w.work)*time.Millisecond); !got.Equal(at(w.end)) {
				t.Fatalf("work %d (due %d ms, %d ms long) ends at %v, want %d ms", i, w.due, w.work, got.Sub(now), w.end)
			}
		}
		if len(c.busy) != 3 { // 0..6 (merged), 10..20, 30..52 (merged)
			t.Fatalf("calendar %v, want three spans", c.busy)
		}
		time.Sleep(25 * time.Millisecond) // the first two spans are past: forgotten
		c.reserve(time.Now(), time.Millisecond)
		if len(c.busy) != 2 {
			t.Fatalf("calendar %v after 25 ms, want the new span and 30..52", c.busy)
		}
	})
}

// With the cost model on, what a node does costs virtual time: a request's round trip over
// links without latency takes the charges of its messages on top of the handler's delay, and
// each step reports what was charged; with it off, CPU costs nothing.
func TestCost_ChargesTheNodesCPUInVirtualTime(t *testing.T) {
	const text = `
nodes: 4
seed: 4
network: {latency: 0s}
agents: {handler_delay: {min: 1ms, max: 1ms}}
steps:
  - join: {}
  - converge: {timeout: 30s}
  - load: {rate: 20, duration: 1s}
    expect: {request_success: 1}
`
	on, err := virtualRun(t, context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	off, err := virtualRun(t, context.Background(), text, WithoutCostModel())
	if err != nil {
		t.Fatal(err)
	}
	lon, loff := on.Steps[2].Metrics, off.Steps[2].Metrics
	if off.CostModel != nil || loff["model_cpu_ms"] != 0 || on.CostModel == nil || lon["model_cpu_ms"] <= 0 {
		t.Fatalf("charged %v with the model, %v without (models %v, %v)", lon["model_cpu_ms"], loff["model_cpu_ms"], on.CostModel, off.CostModel)
	}
	// Without the model: the handler's 1 ms and the timers. With it: the request and its reply
	// charged at both ends on top (a verification keeps the core busy, but the handler's 1 ms
	// leaves it time to finish before the reply).
	least := (4 * DefaultMessageCost).Seconds() * 1000
	if lon["request_p50_ms"] < loff["request_p50_ms"]+least {
		t.Fatalf("request p50 %v ms with the model, %v ms without: the charges (at least %v ms) are missing", lon["request_p50_ms"], loff["request_p50_ms"], least)
	}
	if lon["verified_per_node_min"] <= 0 || lon["msgs_per_node_min"] <= 0 {
		t.Fatalf("signatures and messages not counted: %v", lon)
	}
}

// BenchmarkCostModel measures on this machine, with the node's own code, the three charges of
// the CPU cost model (docs/sim.md, "The CPU cost model"):
//
//	go test -run '^$' -bench CostModel -benchtime 1x ./sim
//
// Each is the CPU time of one thread (or of the process, for the mesh), which a shared machine
// disturbs less than wall time. verify-µs is protocol.Verifier.Verify of a heartbeat-sized
// event whose sender's key is cached and whose signature is not, as a node checks a beat, less
// its decoding. kib-µs is decoding, validating and digesting a document, per KiB (a 16 KiB
// document against a 1 KiB one). message-µs is what is left of a real-time mesh's CPU per
// message, sender and receiver each, once its signatures and bytes are taken out: 20 nodes on
// mocknet, 1 s beats, each node with a verification cache of its own (as on its own machine),
// over a steady minute.
func BenchmarkCostModel(b *testing.B) {
	for b.Loop() {
		verify, kib := codecCosts(b)
		msg := meshMessageCost(b, verify, kib)
		b.ReportMetric(float64(verify)/1e3, "verify-µs")
		b.ReportMetric(float64(kib)/1e3, "kib-µs")
		b.ReportMetric(float64(msg)/1e3, "message-µs")
	}
}

// codecCosts returns the thread CPU time of verifying one heartbeat-sized event, and of
// decoding, validating and digesting one KiB of a document.
func codecCosts(b *testing.B) (verify, perKiB time.Duration) {
	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	bld, err := protocol.NewBuilder("sim:bench:agent", sk, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	doc := func(size int) []byte {
		m, err := bld.Event("sim:bench:other", protocol.IntentNotify, protocol.EventPayload{EventType: "bench", Data: map[string]any{"pad": strings.Repeat("x", size)}})
		if err != nil {
			b.Fatal(err)
		}
		raw, err := protocol.EncodeJSON(m)
		if err != nil {
			b.Fatal(err)
		}
		return raw
	}
	beat, small, large := doc(300), doc(500), doc(15*1024+500)
	keys := protocol.NewKeyCache(16)
	verify = threadCPUPerOp(b, 3000, func() {
		m, _ := protocol.DecodeJSON(beat)
		if err := (&protocol.Verifier{Keys: keys}).Verify(m); err != nil {
			b.Fatal(err)
		}
	})
	read := func(raw []byte) func() {
		return func() {
			m, err := protocol.DecodeJSON(raw)
			if err == nil {
				err = protocol.Validate(m, time.Now(), len(raw), protocol.Limits{})
			}
			if err == nil {
				_, err = protocol.Digest(m)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	decodeBeat := threadCPUPerOp(b, 3000, func() { _, _ = protocol.DecodeJSON(beat) })
	perKiB = (threadCPUPerOp(b, 500, read(large)) - threadCPUPerOp(b, 3000, read(small))) * 1024 / time.Duration(len(large)-len(small))
	return verify - decodeBeat, perKiB
}

// meshMessageCost runs a small mesh in real time and returns its CPU per message and end
// (sender or receiver) once verify per signature checked and perKiB per KiB at each end are
// taken out.
func meshMessageCost(b *testing.B, verify, perKiB time.Duration) time.Duration {
	sc, err := Parse([]byte(`
nodes: 20
seed: 7
network: {latency: 2ms}
node: {heartbeat_interval: 1s}
steps:
  - join: {}
  - converge: {timeout: 60s}
  - sleep: {duration: 20s}
    name: settle
  - sleep: {duration: 60s}
    name: steady
`))
	if err != nil {
		b.Fatal(err)
	}
	rep, err := Run(context.Background(), sc, func(c *runConfig) error { c.ownCaches = true; return nil })
	if err != nil || !rep.Passed {
		b.Fatalf("the mesh: %v, passed %v", err, rep != nil && rep.Passed)
	}
	m := rep.Steps[3].Metrics
	perNodeMin := time.Duration(m["cpu_s_per_node_min"] * float64(time.Second))
	spent := perNodeMin - time.Duration(m["verified_per_node_min"])*verify - time.Duration(2*m["kib_per_node_min"])*perKiB
	return spent / time.Duration(max(2*m["msgs_per_node_min"], 1))
}

// threadCPUPerOp runs op n times on one locked OS thread and returns that thread's CPU time
// per run.
func threadCPUPerOp(b *testing.B, n int, op func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	if err := syscall.Getrusage(rusageThread, &before); err != nil {
		b.Skipf("no thread CPU time here: %v", err)
	}
	for range n {
		op()
	}
	_ = syscall.Getrusage(rusageThread, &after)
	used := time.Duration(after.Utime.Nano()+after.Stime.Nano()) - time.Duration(before.Utime.Nano()+before.Stime.Nano())
	return used / time.Duration(n)
}

// On a tick, a write arrives at the first multiple of the tick at or after the time its link
// (and the cost model) give it: never sooner, at most one tick later, and at once when that
// time is on the grain already. Tick 0 keeps the exact time.
func TestTick_ArrivalsFallOnTheGrain(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		now, link, tick, want time.Duration
	}{
		{0, 20*time.Millisecond + 300*time.Microsecond, time.Millisecond, 21 * time.Millisecond},
		{700 * time.Microsecond, 19 * time.Millisecond, time.Millisecond, 20 * time.Millisecond},
		{time.Millisecond, 19 * time.Millisecond, time.Millisecond, 20 * time.Millisecond},
		{time.Millisecond, 0, time.Millisecond, time.Millisecond},
		{3 * time.Millisecond, 12*time.Millisecond + 1, 5 * time.Millisecond, 20 * time.Millisecond},
		{time.Nanosecond, 20 * time.Millisecond, 0, 20*time.Millisecond + time.Nanosecond},
	}
	for _, c := range cases {
		at := ticked(nil, c.tick)("a", "b", 100, start.Add(c.now), c.link)
		if got := at.Sub(start); got != c.want {
			t.Errorf("now +%s, link %s, tick %s: arrives at +%s, want +%s", c.now, c.link, c.tick, got, c.want)
		}
	}
	// With the cost model, the grain applies to what the model schedules.
	m := newCPUModel(&CostModel{MessageUS: 11}, []peer.ID{"a", "b"})
	at := ticked(m, time.Millisecond)("a", "b", 0, start, 20*time.Millisecond)
	if got := at.Sub(start); got != 21*time.Millisecond {
		t.Errorf("a message charged 11 µs on each side of a 20 ms link arrives at +%s, want +21ms", got)
	}
}
