package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// The node-wide memory bound (docs/security.md, "Measured under attack"; docs/bench.md,
// "Memory under a burst of large messages"): N peers send K signed events of about 16 MiB
// each to one node, all at once, and the node's peak RSS (VmHWM) is read from /proc. The
// node is the real binary on a fresh data directory, in open mode (senders trusted on first
// use) and in authority mode (each sender joined by invitation); the senders are libp2p hosts
// in this process on 127.0.0.1, so their memory is not the node's.
//
//	make bench-memory
//	go test ./e2e -run '^$' -bench BenchmarkMemory -benchtime 1x -memory.senders 8,40 -memory.messages 6
var (
	memSenders  = flag.String("memory.senders", "8,40", "BenchmarkMemory: the numbers of senders to measure, comma-separated")
	memMessages = flag.Int("memory.messages", 6, "BenchmarkMemory: the signed messages each sender sends")
	memModes    = flag.String("memory.modes", "open,authority", "BenchmarkMemory: the trust modes to measure, comma-separated")
	memLimit    = flag.String("memory.limit", "", "BenchmarkMemory: GOMEMLIMIT for the node (empty: its default, memory_limit; off: none)")
	memSettle   = flag.Duration("memory.settle", 10*time.Second, "BenchmarkMemory: how long after the burst the settled RSS is read")
)

// memPad is the pad of each message: the frame comes to just under 16 MiB, the largest
// message a node takes by default.
const memPad = 16*mib - 4096

// BenchmarkMemory sends the burst of each configuration once and reports the node's RSS
// before it (base-MB), its peak during it (peak-MB), its RSS a while after
// (settled-MB, anon-MB), and what the node made of the messages (stored, refused).
func BenchmarkMemory(b *testing.B) {
	for _, mode := range strings.Split(*memModes, ",") {
		for _, field := range strings.Split(*memSenders, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(field))
			if err != nil || n < 1 || n > 256 {
				b.Fatalf("-memory.senders: %q is not a number of senders (1 to 256)", field)
			}
			b.Run(fmt.Sprintf("%s/senders=%d", mode, n), func(b *testing.B) {
				for range b.N {
					burst(b, mode, n, *memMessages)
				}
			})
		}
	}
}

// burst runs one configuration: a fresh node, senders connected (and joined), then every
// sender's messages at once.
func burst(b *testing.B, mode string, senders, messages int) {
	b.StopTimer()
	b.Setenv("GOMEMLIMIT", *memLimit) // the child inherits it; empty is unset for the node
	var node *proc
	switch mode {
	case "open":
		node = newProc(b, "node", "bench:lab:target", "--open")
	case "authority":
		node = newProc(b, "node", "bench:lab:target")
	default:
		b.Fatalf("-memory.modes: %q is neither open nor authority", mode)
	}
	node.start()
	crowd := make([]*attacker, senders)
	var target peer.ID
	for i := range crowd {
		crowd[i] = newAttacker(b, fmt.Sprintf("bench:lab:sender-%d", i))
		if mode == "authority" {
			crowd[i].join(node)
		}
		target = crowd[i].connect(node)
	}
	time.Sleep(2 * time.Second) // let the node settle after the joins and connections
	base, _ := memory(b, node.pid())
	resetPeak(b, node.pid())
	b.StartTimer()
	var tally burstTally
	var wg sync.WaitGroup
	start := make(chan struct{})
	var crowdFrame []byte
	for _, a := range crowd {
		first := mustEncode(b, a.event("bench:lab:target", memPad)) // built before the start
		crowdFrame = first
		wg.Go(func() {
			<-start
			tally.add(sendBurst(a, target, first, messages))
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)
	b.StopTimer()
	_, peak := memory(b, node.pid())
	time.Sleep(*memSettle)
	settled, _ := memory(b, node.pid())
	anon := anonymous(b, node.pid())
	if code, _, err := node.do("GET", "/v1/status", nil); err != nil || code != 200 {
		b.Fatalf("the node stopped answering its agent: %d %v", code, err)
	}
	b.ReportMetric(float64(base)/1e6, "base-MB")
	b.ReportMetric(float64(peak)/1e6, "peak-MB")
	b.ReportMetric(float64(settled)/1e6, "settled-MB")
	b.ReportMetric(float64(anon)/1e6, "anon-MB")
	b.ReportMetric(float64(tally.stored), "stored")
	b.ReportMetric(float64(tally.refused), "refused")
	b.ReportMetric(took.Seconds(), "burst-s")
	b.ReportMetric(0, "ns/op")
	if path := os.Getenv("MEMORY_BENCH_LOG"); path != "" { // the node's log, to read what it did
		if err := os.WriteFile(path, []byte(node.log.String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%s, %d senders x %d messages of %.1f MB: RSS %d MB before, peak %d MB, %d MB (%d MB anonymous) %s after; %d stored, %d refused (%v), %d unanswered; the burst took %s",
		mode, senders, messages, float64(len(crowdFrame))/1e6, base/1e6, peak/1e6, settled/1e6, anon/1e6, *memSettle, tally.stored, tally.refused, tally.codes, tally.unanswered, took.Round(time.Millisecond))
}

// burstCount is what one sender, or all of them, heard back.
type burstCount struct {
	stored, refused, unanswered int
	codes                       map[protocol.Code]int
}

// burstTally adds up the senders' counts; mu guards it.
type burstTally struct {
	mu sync.Mutex
	burstCount
}

func (t *burstTally) add(o burstCount) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stored, t.refused, t.unanswered = t.stored+o.stored, t.refused+o.refused, t.unanswered+o.unanswered
	if t.codes == nil {
		t.codes = map[protocol.Code]int{}
	}
	for c, n := range o.codes {
		t.codes[c] += n
	}
}

// sendBurst writes first and then messages-1 more events on one stream, as fast as the node
// reads them, while a reader counts the node's answers: ids its receipts cover (stored) and
// errors (refused). It returns when every message was answered or the stream ended.
func sendBurst(a *attacker, target peer.ID, first []byte, messages int) burstCount {
	out := burstCount{codes: map[protocol.Code]int{}}
	s, err := a.stream(target)
	if err != nil {
		out.unanswered = messages
		return out
	}
	defer s.Reset()
	answered := make(chan burstCount, 1)
	go func() {
		got := burstCount{codes: map[protocol.Code]int{}}
		br := bufio.NewReader(s)
		for got.stored+got.refused < messages {
			_ = s.SetReadDeadline(time.Now().Add(5 * time.Minute)) // a burst of 40 peers takes minutes
			raw, err := protocol.ReadFrame(br, 1<<20)
			if err != nil {
				break
			}
			m, err := protocol.DecodeJSON(raw)
			if err != nil {
				break
			}
			if m.Message.Type == protocol.TypeError {
				e, _ := protocol.ErrorOf(m)
				got.refused++
				got.codes[e.Code]++
				continue
			}
			got.stored += receiptCount(m)
		}
		answered <- got
	}()
	_ = s.SetWriteDeadline(time.Now().Add(5 * time.Minute))
	frame := first
	for i := range messages {
		if i > 0 {
			if frame, err = nextEvent(a); err != nil {
				break
			}
		}
		if protocol.WriteFrame(s, frame) != nil {
			break
		}
	}
	got := <-answered
	got.unanswered = messages - got.stored - got.refused
	return got
}

// nextEvent builds and encodes one more of a's events (a.event would fail the benchmark from
// a goroutine that is not its own).
func nextEvent(a *attacker) ([]byte, error) {
	m, err := a.b.Event("bench:lab:target", protocol.IntentNotify, protocol.EventPayload{EventType: "burst", Detail: strings.Repeat("a", memPad)})
	if err != nil {
		return nil, err
	}
	return protocol.EncodeJSON(m)
}

// receiptCount is how many message ids a receipt covers.
func receiptCount(m *protocol.Message) int {
	var r struct {
		Status  string `json:"status"`
		Receipt struct {
			MessageIDs []string `json:"message_ids"`
		} `json:"receipt"`
	}
	if protocol.DecodePayload(m, &r) != nil || r.Status != protocol.ResponsePending {
		return 0
	}
	return len(r.Receipt.MessageIDs)
}

// anonymous reads a process's anonymous resident memory (RssAnon), in bytes: the heap and
// stacks, without the binary's pages.
func anonymous(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatalf("memory of process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
