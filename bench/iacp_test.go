package bench

// The IACP systems: two nodes built with node.New over TCP loopback, as node/bench_test.go
// builds them, through the node's exported API only.

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// The agent ids of the two nodes of every IACP pair.
const (
	iacpSender   = "bench:iacp:a"
	iacpReceiver = "bench:iacp:b"
)

// The configurations compared, as node/bench_test.go names them: the defaults (durable
// delivery and the audit log on, the data directory on disk), nodurable (durable off, audit
// on), plain (both off: the non-durable path).
var (
	iacpDefaults  []node.Option
	iacpNoDurable = []node.Option{node.WithDurable(false)}
	iacpPlain     = []node.Option{node.WithDurable(false), node.WithAudit(false, false)}
)

// iacpPair starts a sender and a receiver node with opts over the bench's base options: own
// data directories, TCP on 127.0.0.1 only, no NAT, DHT or gossip, no logs, and an inbound rate
// limit high enough not to refuse the load (the default of 200 messages a second per peer
// would). The receiver accepts every handoff request with an empty body and counts notify
// events. Cleanup closes both nodes.
func iacpPair(tb testing.TB, opts ...node.Option) (sender *node.Node, events *atomic.Int64) {
	tb.Helper()
	start := func(agent string) *node.Node {
		all := append([]node.Option{node.WithDataDir(tb.TempDir()), node.WithAgent(agent, protocol.Manifest{Tools: []string{"terminal"}}),
			node.WithNAT(false), node.WithDiscovery(false), node.WithGossip(false), node.WithListen("/ip4/127.0.0.1/tcp/0"),
			node.WithLogger(slog.New(slog.DiscardHandler)), node.WithRateLimit(1e9, 1<<30)}, opts...)
		n, err := node.New(all...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { n.Close() })
		return n
	}
	a, b := start(iacpSender), start(iacpReceiver)
	events = new(atomic.Int64)
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *node.Request) error {
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *node.Request) error { events.Add(1); return nil })
	ai := peer.AddrInfo{ID: b.ID(), Addrs: b.ListenAddrs()}
	a.AddPeer(iacpReceiver, ai)
	if err := a.Connect(context.Background(), ai); err != nil {
		tb.Fatal(err)
	}
	return a, events
}

// iacpRTT returns one request with a 1 KiB payload and its response, timed from before the
// request is built and signed until the response is verified and returned: both signatures
// and both verifications are inside, as in the budget (node/bench_test.go starts its clock
// after the build, so its figures lack one signature).
func iacpRTT(tb testing.TB, opts ...node.Option) func(context.Context) error {
	tb.Helper()
	a, _ := iacpPair(tb, opts...)
	payload := payload1K()
	return func(ctx context.Context) error {
		req, err := a.Builder().Request(iacpReceiver, protocol.IntentHandoff, payload)
		if err != nil {
			return err
		}
		_, err = a.Request(ctx, req)
		return err
	}
}

// iacpOneWay returns the one-way system of a pair: a signed notify event, sent and
// acknowledged by the receiver's signed receipt (durably stored first on both sides with the
// defaults), and the number of events the receiver's handler has seen.
func iacpOneWay(tb testing.TB, opts ...node.Option) onewaySystem {
	tb.Helper()
	a, events := iacpPair(tb, opts...)
	return onewaySystem{
		send: func(ctx context.Context) error {
			ev, err := a.Builder().Event(iacpReceiver, protocol.IntentNotify, protocol.EventPayload{EventType: "tick"})
			if err != nil {
				return err
			}
			return a.Send(ctx, ev)
		},
		received: func() (int64, error) { return events.Load(), nil },
	}
}

// iacpRequestBytes is the size on the wire of the request iacpRTT sends, for the report.
func iacpRequestBytes(tb testing.TB) int {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := protocol.NewBuilder(iacpSender, key, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req, err := b.Request(iacpReceiver, protocol.IntentHandoff, payload1K())
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := protocol.EncodeJSON(req)
	if err != nil {
		tb.Fatal(err)
	}
	return len(raw)
}

// iacpCPU returns the codec and crypto work of one IACP exchange without a transport or a
// node: the sender builds and signs the request and encodes it; the receiver decodes and
// verifies it (with a key cache, as a node does), builds and signs the response and encodes
// it; the sender decodes and verifies that. A node's other inbound checks are not in it.
func iacpCPU(tb testing.TB) func(context.Context) error {
	tb.Helper()
	builder := func(agent string) *protocol.Builder {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		b, err := protocol.NewBuilder(agent, key, nil)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	a, b := builder(iacpSender), builder(iacpReceiver)
	va := &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize)}
	vb := &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize)}
	payload := payload1K()
	// hop encodes m, decodes it and verifies it with v, as the wire and the receiver would.
	hop := func(m *protocol.Message, v *protocol.Verifier) (*protocol.Message, error) {
		raw, err := protocol.EncodeJSON(m)
		if err != nil {
			return nil, err
		}
		got, err := protocol.DecodeJSON(raw)
		if err != nil {
			return nil, err
		}
		return got, v.Verify(got)
	}
	return func(context.Context) error {
		req, err := a.Request(iacpReceiver, protocol.IntentHandoff, payload)
		if err != nil {
			return err
		}
		if req, err = hop(req, vb); err != nil {
			return err
		}
		resp, err := b.Response(req, protocol.ResponseAccepted, nil)
		if err != nil {
			return err
		}
		_, err = hop(resp, va)
		return err
	}
}
