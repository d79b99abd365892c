package bench

// The two comparisons and what they share: the flags, the interleaved rounds, percentiles and
// the report. Every system is built once per benchmark, warmed up, then measured in rounds
// that alternate between the systems (the first system of each round rotates), so that the
// load of the shared machine and the work one system leaves behind (the durable store's
// commits after an answer) fall on all of them alike.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"go.uber.org/goleak"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// The sizes of a run, as flags of the test binary: go test ... -args -rounds 5.
var (
	rounds   = flag.Int("rounds", 10, "interleaved rounds of every comparison")
	requests = flag.Int("requests", 500, "round trips per system per round (BenchmarkRTT)")
	oneway   = flag.Int("oneway", 2000, "messages per system per round (BenchmarkOneWay)")
	senders  = flag.Int("senders", 256, "concurrent senders (BenchmarkOneWay)")
)

// receiveTimeout bounds the wait, after the senders return, for the receiver to have
// verified a one-way round's messages.
const receiveTimeout = time.Minute

// reports are the benchmarks' tables, printed by TestMain once they all ran: the testing
// package cuts a benchmark's log to 10 lines.
var (
	reportsMu sync.Mutex
	reports   []string
)

// report keeps a benchmark's table for TestMain.
func report(b *testing.B, table string) {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	reports = append(reports, fmt.Sprintf("\n%s\n%s", b.Name(), table))
}

// TestMain runs the tests and benchmarks, prints the benchmarks' tables, and fails the run if
// a goroutine of a node, a host, a server or a client outlives them, but for the process-wide
// workers their packages start on import (as testsupport.VerifyTestMain does).
func TestMain(m *testing.M) {
	code := m.Run()
	for _, r := range reports {
		fmt.Print(r)
	}
	if code == 0 {
		if err := goleak.Find(testsupport.ProcessWorkers()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left running: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// payload1K is the 1 KiB request payload, as in node/bench_test.go.
func payload1K() map[string]any {
	return map[string]any{"task": "summarise", "text": stringOf(960)}
}

// stringOf returns n letters.
func stringOf(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

// pct returns the p-quantile of xs (nearest rank, rounding down), as node/bench_test.go does.
func pct(xs []time.Duration, p float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// rttSystem is one system of BenchmarkRTT: name and one exchange, which the harness times.
type rttSystem struct {
	name string
	once func(context.Context) error
}

// BenchmarkRTT compares request/response round trips with a 1 KiB payload, -rounds rounds of
// -requests exchanges per system, each system one after the other within a round:
//
//   - echo: a framed 1 KiB echo between two go-libp2p hosts on a reused stream (echo_test.go);
//   - sign, verify: one Ed25519 signature of a SHA-256 digest, one verification, as the node
//     makes them; sign-stdlib, verify-stdlib: the same with crypto/ed25519;
//   - iacp-cpu, nats-signed-cpu: the codec and crypto work of an IACP exchange and of a
//     NATS-signed one, without transport (both signatures, both verifications);
//   - nats-plain: NATS request/reply of the encoded payload, answered with a constant;
//   - nats-signed: the same with IACP's crypto work both ways (signed_test.go);
//   - iacp-plain, iacp-nodurable, iacp-defaults: node.Request of a handoff request answered
//     "accepted", with durable delivery and the audit log off, durable off, both on.
//
// The IACP and NATS-signed clocks run from before the request is signed until the response
// is verified. budget is echo p50 + 2 sign p50 + 2 verify p50, with the node's Ed25519
// (curve25519-voi, crypto_test.go), which NATS-signed uses too; budget-stdlib is the same
// with crypto/ed25519 (sign-stdlib, verify-stdlib), the budget before the node moved to
// curve25519-voi, reported beside it. The ratios it aims at: the
// non-durable path's p50 at most 1.3 x budget, its p99 at most 2 x its p50 and below NATS's
// with the same signing; and with the defaults p50 < 1 ms and p99 < 2 ms.
func BenchmarkRTT(b *testing.B) {
	systems := []rttSystem{
		{"echo", echoRTT(b)},
		{"sign", signOnce(b)},
		{"verify", verifyOnce(b)},
		{"sign-stdlib", signStdlib(b)},
		{"verify-stdlib", verifyStdlib(b)},
		{"iacp-cpu", iacpCPU(b)},
		{"nats-signed-cpu", signedCPU(b)},
		{"nats-plain", natsRTT(b, false)},
		{"nats-signed", natsRTT(b, true)},
		{"iacp-plain", iacpRTT(b, iacpPlain...)},
		{"iacp-nodurable", iacpRTT(b, iacpNoDurable...)},
		{"iacp-defaults", iacpRTT(b, iacpDefaults...)},
	}
	ctx := context.Background()
	for range 50 { // connections, sessions, streams, the stores' first pages
		for _, s := range systems {
			if err := s.once(ctx); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
		}
	}
	samples := make(map[string][]time.Duration, len(systems))
	b.ResetTimer()
	for range b.N {
		for r := range *rounds {
			for k := range systems {
				s := systems[(r+k)%len(systems)]
				for range *requests {
					t0 := time.Now()
					err := s.once(ctx)
					d := time.Since(t0)
					if err != nil {
						b.Fatalf("%s: %v", s.name, err)
					}
					samples[s.name] = append(samples[s.name], d)
				}
			}
		}
	}
	b.StopTimer()

	p50 := func(name string) time.Duration { return pct(samples[name], .5) }
	p99 := func(name string) time.Duration { return pct(samples[name], .99) }
	ratio := func(x, y time.Duration) float64 { return float64(x) / float64(y) }
	budget := p50("echo") + 2*p50("sign") + 2*p50("verify")
	budgetStdlib := p50("echo") + 2*p50("sign-stdlib") + 2*p50("verify-stdlib")

	var out strings.Builder
	fmt.Fprintf(&out, "%d rounds x %d round trips per system; request on the wire: iacp %d B, nats-signed %d B, echo 1024 B\n",
		*rounds, *requests, iacpRequestBytes(b), natsSignedBytes(b))
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "system\tp50 µs\tp99 µs\tp50/budget\tp99/p50\tp99/nats-signed p99\t")
	for _, s := range systems {
		n := s.name
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t\n", n, us(p50(n)), us(p99(n)),
			ratio(p50(n), budget), ratio(p99(n), p50(n)), ratio(p99(n), p99("nats-signed")))
		b.ReportMetric(us(p50(n)), n+"-p50-µs")
		b.ReportMetric(us(p99(n)), n+"-p99-µs")
		switch n {
		case "verify":
			fmt.Fprintf(w, "budget = echo + 2 sign + 2 verify\t%.0f\t\t\t\t\t\n", us(budget))
		case "verify-stdlib":
			fmt.Fprintf(w, "budget-stdlib = echo + 2 sign-stdlib + 2 verify-stdlib\t%.0f\t\t\t\t\t\n", us(budgetStdlib))
		}
	}
	w.Flush()
	b.ReportMetric(us(budget), "budget-µs")
	b.ReportMetric(us(budgetStdlib), "budget-stdlib-µs")
	goals := []struct {
		what  string
		value float64
		goal  string
		met   bool
	}{
		{"iacp-plain p50 / budget", ratio(p50("iacp-plain"), budget), "<= 1.3", ratio(p50("iacp-plain"), budget) <= 1.3},
		{"iacp-plain p99 / iacp-plain p50", ratio(p99("iacp-plain"), p50("iacp-plain")), "<= 2", p99("iacp-plain") <= 2*p50("iacp-plain")},
		{"iacp-plain p99 / nats-signed p99", ratio(p99("iacp-plain"), p99("nats-signed")), "< 1", p99("iacp-plain") < p99("nats-signed")},
		{"iacp-nodurable p50 / budget", ratio(p50("iacp-nodurable"), budget), "<= 1.3", ratio(p50("iacp-nodurable"), budget) <= 1.3},
		{"iacp-nodurable p99 / iacp-nodurable p50", ratio(p99("iacp-nodurable"), p50("iacp-nodurable")), "<= 2", p99("iacp-nodurable") <= 2*p50("iacp-nodurable")},
		{"iacp-nodurable p99 / nats-signed p99", ratio(p99("iacp-nodurable"), p99("nats-signed")), "< 1", p99("iacp-nodurable") < p99("nats-signed")},
		{"iacp-defaults p50 µs", us(p50("iacp-defaults")), "< 1000", p50("iacp-defaults") < time.Millisecond},
		{"iacp-defaults p99 µs", us(p99("iacp-defaults")), "< 2000", p99("iacp-defaults") < 2*time.Millisecond},
		{"iacp-defaults p99 / nats-signed p99", ratio(p99("iacp-defaults"), p99("nats-signed")), "", true},
		{"iacp-plain p50 / budget-stdlib", ratio(p50("iacp-plain"), budgetStdlib), "", true},
	}
	w = tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(&out)
	fmt.Fprintln(w, "ratio\tvalue\tgoal\tmet\t")
	for _, g := range goals {
		met := "yes"
		if g.goal == "" {
			met = ""
		} else if !g.met {
			met = "NO"
		}
		value := fmt.Sprintf("%.2f", g.value)
		if strings.HasSuffix(g.what, "µs") {
			value = fmt.Sprintf("%.0f", g.value)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", g.what, value, g.goal, met)
	}
	w.Flush()
	report(b, out.String())
	b.ReportMetric(ratio(p50("iacp-plain"), budget), "plain-p50/budget")
	b.ReportMetric(ratio(p99("iacp-plain"), p50("iacp-plain")), "plain-p99/p50")
	b.ReportMetric(ratio(p99("iacp-plain"), p99("nats-signed")), "plain-p99/nats-signed-p99")
	b.ReportMetric(ratio(p50("iacp-nodurable"), budget), "nodurable-p50/budget")
	b.ReportMetric(ratio(p99("iacp-nodurable"), p50("iacp-nodurable")), "nodurable-p99/p50")
	b.ReportMetric(ratio(p99("iacp-nodurable"), p99("nats-signed")), "nodurable-p99/nats-signed-p99")
	b.ReportMetric(0, "ns/op")
}

// onewaySystem is one system of BenchmarkOneWay: send one message (returning when the system
// says it is sent: acknowledged where it acknowledges), and how many messages the receiver has
// verified so far, with the first message it refused.
type onewaySystem struct {
	send     func(context.Context) error
	received func() (int64, error)
}

// oneWayRound sends n messages through s from `senders` goroutines that share the count, and
// returns the time from the first send until every sender returned and the receiver verified
// all n.
func oneWayRound(ctx context.Context, s onewaySystem, n, senders int) (time.Duration, error) {
	before, err := s.received()
	if err != nil {
		return 0, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for range senders {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := s.send(ctx); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	deadline := time.Now().Add(receiveTimeout)
	for {
		got, err := s.received()
		if err != nil {
			return 0, fmt.Errorf("receiver: %w", err)
		}
		if got >= before+int64(n) {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("receiver verified %d of %d messages in %v", got-before, n, receiveTimeout)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkOneWay compares signed one-way messages per second from -senders concurrent
// senders, -rounds rounds of -oneway messages per system, each system one after the other
// within a round. A round ends when every sender returned and the receiver verified every
// message; msg/s is all messages over all rounds' time.
//
//   - iacp-plain, iacp-nodurable, iacp-defaults: node.Send of a signed notify event, which
//     returns on the receiver's signed receipt; with the defaults both sides store the message
//     durably (fsynced) first;
//   - nats-core-signed: core NATS publish of the same event signed as in signed_test.go: no
//     acknowledgement, no storage;
//   - nats-acked-signed: a core NATS request answered by a signed receipt, the acknowledgement
//     IACP gives, without storage;
//   - jetstream-signed, jetstream-syncalways-signed: JetStream publish to a file-store stream
//     (waiting for the server's acknowledgement), by default synced every 2 minutes, and
//     fsynced on every write; one durable consumer acknowledges each message it verified.
//
// Goals: >= 10,000 msg/s with the defaults and >= 15,000 plain.
func BenchmarkOneWay(b *testing.B) {
	type named struct {
		name string
		sys  onewaySystem
	}
	systems := []named{
		{"iacp-plain", iacpOneWay(b, iacpPlain...)},
		{"iacp-nodurable", iacpOneWay(b, iacpNoDurable...)},
		{"iacp-defaults", iacpOneWay(b, iacpDefaults...)},
		{"nats-core-signed", natsCoreOneWay(b)},
		{"nats-acked-signed", natsAckedOneWay(b)},
		{"jetstream-signed", jetStreamOneWay(b, false)},
		{"jetstream-syncalways-signed", jetStreamOneWay(b, true)},
	}
	ctx := context.Background()
	for _, s := range systems { // connections, sessions, streams, the stores' first pages
		if _, err := oneWayRound(ctx, s.sys, *senders, *senders); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
	}
	elapsed := make(map[string]time.Duration, len(systems))
	perRound := make(map[string][]float64, len(systems))
	b.ResetTimer()
	for range b.N {
		for r := range *rounds {
			for k := range systems {
				s := systems[(r+k)%len(systems)]
				d, err := oneWayRound(ctx, s.sys, *oneway, *senders)
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				elapsed[s.name] += d
				perRound[s.name] = append(perRound[s.name], float64(*oneway)/d.Seconds())
			}
		}
	}
	b.StopTimer()

	total := float64(b.N * *rounds * *oneway)
	rate := func(name string) float64 { return total / elapsed[name].Seconds() }
	var out strings.Builder
	fmt.Fprintf(&out, "%d rounds x %d messages per system from %d senders\n", *rounds, *oneway, *senders)
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "system\tmsg/s\tslowest round\tfastest round\t")
	for _, s := range systems {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t\n", s.name, rate(s.name), slices.Min(perRound[s.name]), slices.Max(perRound[s.name]))
		b.ReportMetric(rate(s.name), s.name+"-msg/s")
	}
	w.Flush()
	fmt.Fprintln(&out)
	w = tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ratio of msg/s\tvalue\t")
	for _, r := range [][2]string{
		{"iacp-plain", "nats-core-signed"},
		{"iacp-nodurable", "nats-core-signed"},
		{"iacp-plain", "nats-acked-signed"},
		{"iacp-defaults", "jetstream-signed"},
		{"iacp-defaults", "jetstream-syncalways-signed"},
		{"iacp-defaults", "iacp-plain"},
	} {
		fmt.Fprintf(w, "%s / %s\t%.2f\t\n", r[0], r[1], rate(r[0])/rate(r[1]))
	}
	w.Flush()
	report(b, out.String())
	b.ReportMetric(0, "ns/op")
}

// signOnce returns one Ed25519 signature of a SHA-256 digest of 1 KiB, the signature IACP
// makes per message, as the node makes it (crypto_test.go).
func signOnce(tb testing.TB) func(context.Context) error {
	tb.Helper()
	k := newEdPair(tb)
	digest := sha256.Sum256([]byte(stringOf(1024)))
	return func(context.Context) error { k.sign(digest[:]); return nil }
}

// verifyOnce returns one verification of such a signature, as the node makes it.
func verifyOnce(tb testing.TB) func(context.Context) error {
	tb.Helper()
	k := newEdPair(tb)
	digest := sha256.Sum256([]byte(stringOf(1024)))
	sig := k.sign(digest[:])
	return func(context.Context) error {
		if !k.verify(digest[:], sig) {
			return errors.New("verify")
		}
		return nil
	}
}

// signStdlib is signOnce with crypto/ed25519, which the node used before curve25519-voi.
func signStdlib(tb testing.TB) func(context.Context) error {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	digest := sha256.Sum256([]byte(stringOf(1024)))
	return func(context.Context) error { ed25519.Sign(priv, digest[:]); return nil }
}

// verifyStdlib is verifyOnce with crypto/ed25519.
func verifyStdlib(tb testing.TB) func(context.Context) error {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	digest := sha256.Sum256([]byte(stringOf(1024)))
	sig := ed25519.Sign(priv, digest[:])
	return func(context.Context) error {
		if !ed25519.Verify(pub, digest[:], sig) {
			return errors.New("verify")
		}
		return nil
	}
}
