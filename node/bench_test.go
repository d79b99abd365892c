package node

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/trust"
)

const echoProtocol = "/iacp-bench/echo/1.0.0"

// benchPair starts two nodes on real TCP loopback hosts, b answering handoff requests and
// counting notify events, plus a raw framed echo protocol on b's host.
func benchPair(tb testing.TB, opts ...Option) (a, b *Node, events *atomic.Int64) {
	tb.Helper()
	return benchPairOf(tb, nil, nil, opts...)
}

// benchPairOf is benchPair with aOpts for a only and bOpts for b only.
func benchPairOf(tb testing.TB, aOpts, bOpts []Option, opts ...Option) (a, b *Node, events *atomic.Int64) {
	tb.Helper()
	start := func(agent string, own []Option) *Node {
		all := append([]Option{WithDataDir(tb.TempDir()), WithAgent(agent, protocolManifest()), WithNAT(false),
			WithDiscovery(false), WithGossip(false), WithListen("/ip4/127.0.0.1/tcp/0"),
			WithLogger(slog.New(slog.DiscardHandler)), WithRateLimit(1e9, 1<<30)}, opts...)
		all = append(all, own...)
		n, err := New(all...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { n.Close() })
		return n
	}
	a, b = start("bench:host:a", aOpts), start("bench:host:b", bOpts)
	a.AddPeer("bench:host:b", peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()})
	events = new(atomic.Int64)
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { events.Add(1); return nil })
	b.host.SetStreamHandler(echoProtocol, func(s network.Stream) {
		defer s.Close()
		br := bufio.NewReader(s)
		for {
			f, err := protocol.ReadFrame(br, 1<<20)
			if err != nil {
				return
			}
			if err := protocol.WriteFrame(s, f); err != nil {
				return
			}
		}
	})
	if err := a.host.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()}); err != nil {
		tb.Fatal(err)
	}
	return a, b, events
}

// payload1K is a 1 KiB request payload.
func payload1K() map[string]any {
	return map[string]any{"task": "summarise", "text": stringOf(960)}
}

func stringOf(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

func pct(xs []time.Duration, p float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// rttConfigs are the configurations BenchmarkRTT and BenchmarkOneWay compare in one run.
// The first is the headline: what node.New and `iacp-node run` use (durable delivery and the
// audit log on, the data directory on disk). The lighter ones are reported beside it under
// their prefix: "nodurable" (durable off, audit on) and "plain" (durable and audit off, what
// these benchmarks measured before durable delivery became the default).
var rttConfigs = []struct {
	prefix string // metric prefix; "" for the defaults
	opts   []Option
}{
	{"", nil},
	{"nodurable-", []Option{WithDurable(false)}},
	{"plain-", []Option{WithDurable(false), WithAudit(false, false)}},
}

// BenchmarkRTT measures, interleaved in one run: a raw libp2p framed echo of 1 KiB on a
// reused stream; an Ed25519 sign and verify of a digest, as the node makes them (on
// curve25519-voi, the key expanded once: protocol/edkey.go) and with crypto/ed25519; and an
// IACP request/response with a 1 KiB payload (signed request, verified; signed response,
// verified) on one pair of loopback hosts per configuration of rttConfigs. The echo runs
// between the defaults' pair.
//
// Metrics: p50-µs, p99-µs and p50/budget are the defaults' round trip; nodurable- and plain-
// prefix the same for the lighter configurations. budget-µs is echo + 2 signs + 2 verifies
// with the node's crypto; budget-stdlib-µs the same with crypto/ed25519, and
// plain-p50/budget-stdlib the plain round trip against it.
// Goals: with the defaults p50 < 1 ms and p99 < 2 ms; plain p50 <= 1.3 x
// budget.
func BenchmarkRTT(b *testing.B) {
	pairs := make([]*Node, len(rttConfigs))
	var bn *Node
	for i, c := range rttConfigs {
		a, peerB, _ := benchPair(b, c.opts...)
		pairs[i] = a
		if i == 0 {
			bn = peerB
		}
	}
	ctx := context.Background()
	s, err := pairs[0].host.NewStream(ctx, bn.ID(), echoProtocol)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	br := bufio.NewReader(s)
	frame := []byte(stringOf(1024))
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	expanded, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		b.Fatal(err)
	}
	rules := &voi.Options{Verify: voi.VerifyOptionsStdLib}
	digest := sha256.Sum256(frame)
	payload := payload1K()
	round := func(a *Node) time.Duration { return roundTrip(b, ctx, a, payload) }
	var echo, sign, verify, signStd, verifyStd []time.Duration
	rtt := make([][]time.Duration, len(pairs))
	for range 50 { // sessions, streams, the store's first pages
		for _, a := range pairs {
			round(a)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := protocol.WriteFrame(s, frame); err != nil {
			b.Fatal(err)
		}
		if _, err := protocol.ReadFrame(br, 1<<20); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		sig := voi.Sign(voi.PrivateKey(priv), digest[:])
		t2 := time.Now()
		if !voi.VerifyExpandedWithOptions(expanded, digest[:], sig, rules) {
			b.Fatal("verify")
		}
		t3 := time.Now()
		sig = ed25519.Sign(priv, digest[:])
		t4 := time.Now()
		if !ed25519.Verify(pub, digest[:], sig) {
			b.Fatal("verify")
		}
		t5 := time.Now()
		echo, sign, verify = append(echo, t1.Sub(t0)), append(sign, t2.Sub(t1)), append(verify, t3.Sub(t2))
		signStd, verifyStd = append(signStd, t4.Sub(t3)), append(verifyStd, t5.Sub(t4))
		for j, a := range pairs {
			rtt[j] = append(rtt[j], round(a))
		}
	}
	b.StopTimer()
	budget := pct(echo, .5) + 2*pct(sign, .5) + 2*pct(verify, .5)
	budgetStd := pct(echo, .5) + 2*pct(signStd, .5) + 2*pct(verifyStd, .5)
	b.ReportMetric(us(pct(echo, .5)), "echo-p50-µs")
	b.ReportMetric(us(pct(sign, .5)), "sign-µs")
	b.ReportMetric(us(pct(verify, .5)), "verify-µs")
	b.ReportMetric(us(budget), "budget-µs")
	b.ReportMetric(us(pct(signStd, .5)), "sign-stdlib-µs")
	b.ReportMetric(us(pct(verifyStd, .5)), "verify-stdlib-µs")
	b.ReportMetric(us(budgetStd), "budget-stdlib-µs")
	for j, c := range rttConfigs {
		b.ReportMetric(us(pct(rtt[j], .5)), c.prefix+"p50-µs")
		b.ReportMetric(us(pct(rtt[j], .99)), c.prefix+"p99-µs")
		b.ReportMetric(float64(pct(rtt[j], .5))/float64(budget), c.prefix+"p50/budget")
	}
	b.ReportMetric(float64(pct(rtt[len(rtt)-1], .5))/float64(budgetStd), "plain-p50/budget-stdlib")
}

// BenchmarkOneWay measures signed one-way messages per second (notify events, each
// acknowledged by a signed receipt) from 256 concurrent senders, for each configuration of
// rttConfigs in the same run: msg/s is the defaults' (durable and audit on), nodurable-msg/s
// and plain-msg/s the lighter ones'; durable/plain is the ratio of the first to the last.
// Goals: >= 10,000 msg/s with the defaults and >= 15,000 plain; durable >= 50% of
// plain.
func BenchmarkOneWay(b *testing.B) {
	run := func(opts ...Option) float64 {
		a, _, events := benchPair(b, opts...)
		ctx := context.Background()
		const workers = 256
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					ev, err := a.Builder().Event("bench:host:b", protocol.IntentNotify, protocol.EventPayload{EventType: "tick"})
					if err == nil {
						err = a.Send(ctx, ev)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		deadline := time.Now().Add(30 * time.Second)
		for events.Load() < int64(b.N) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return float64(b.N) / elapsed.Seconds()
	}
	b.ResetTimer()
	rates := make([]float64, len(rttConfigs))
	for i, c := range rttConfigs {
		rates[i] = run(c.opts...)
	}
	b.StopTimer()
	for i, c := range rttConfigs {
		b.ReportMetric(rates[i], c.prefix+"msg/s")
	}
	b.ReportMetric(rates[0]/rates[len(rates)-1], "durable/plain")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTrustRTT measures what trust costs on the request/response round trip, interleaved
// in one run on three pairs of loopback hosts with the same configuration otherwise: open mode
// (no certificates); authority mode (each side checks the other's certificate, cached per
// peer); and authority mode where b's intent policy requires a capability that a's request
// grants with an A2ACP token in security.auth_token (verified once, then remembered). Goal
// : certificate and token checks cost less than 10% of the round trip.
func BenchmarkTrustRTT(b *testing.B) {
	auth, err := authority.Generate()
	if err != nil {
		b.Fatal(err)
	}
	certified := func(agent string, grants ...string) (Option, Option) {
		sk, _, _ := crypto.GenerateEd25519Key(nil)
		id, _ := peer.IDFromPrivateKey(sk)
		c, err := auth.Issue(authority.CertRequest{AgentID: agent, Peer: id, Permissions: grants})
		if err != nil {
			b.Fatal(err)
		}
		return WithKey(sk), WithAuthority(auth.ID(), c.Raw)
	}
	plain := []Option{WithDurable(false), WithAudit(false, false)}
	pair := func(policy map[string][]string) (*Node, *Node) {
		ak, ac := certified("bench:host:a")
		bk, bc := certified("bench:host:b")
		a, bn, _ := benchPairOf(b, []Option{ak, ac}, []Option{bk, bc, WithIntentPolicy(policy)}, plain...)
		return a, bn
	}
	openA, _, _ := benchPair(b, append([]Option{WithTrust(trust.Open)}, plain...)...)
	certA, _ := pair(nil)
	tokA, _ := pair(map[string][]string{"handoff": {"deploy"}})
	tok, err := auth.IssueToken(authority.TokenRequest{Subject: "bench:host:a", Audience: "bench:host:b", Capabilities: []string{"deploy"}, TTL: authority.MaxTokenTTL})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := payload1K()
	round := func(a *Node, opts ...protocol.Option) time.Duration { return roundTrip(b, ctx, a, payload, opts...) }
	withToken := protocol.WithSecurity(protocol.Security{AuthToken: tok.Raw})
	for range 50 { // sessions, certificate caches, the token cache
		round(openA)
		round(certA)
		round(tokA, withToken)
	}
	var open, cert, token []time.Duration
	b.ResetTimer()
	for range b.N {
		open = append(open, round(openA))
		cert = append(cert, round(certA))
		token = append(token, round(tokA, withToken))
	}
	b.StopTimer()
	b.ReportMetric(us(pct(open, .5)), "open-p50-µs")
	b.ReportMetric(us(pct(cert, .5)), "cert-p50-µs")
	b.ReportMetric(us(pct(token, .5)), "token-p50-µs")
	b.ReportMetric(us(pct(token, .99)), "token-p99-µs")
	b.ReportMetric(float64(pct(cert, .5))/float64(pct(open, .5)), "cert/open")
	b.ReportMetric(float64(pct(token, .5))/float64(pct(open, .5)), "token/open")
}

// roundTrip times one request from a to bench:host:b and its response, from before the
// request is built and signed (so that both signatures and both verifications are inside, as
// in the budget and in bench/, the NATS comparison) until the response is verified and
// returned. Before 2026-11-27 the clock started after the build: one signature less.
func roundTrip(b *testing.B, ctx context.Context, a *Node, payload any, opts ...protocol.Option) time.Duration {
	b.Helper()
	t0 := time.Now()
	req, err := a.Builder().Request("bench:host:b", protocol.IntentHandoff, payload, opts...)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Request(ctx, req); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}
