package bench

// The NATS systems: an embedded nats-server on a random port of 127.0.0.1 (so every message
// crosses loopback TCP twice, client to server to client, where libp2p crosses it once),
// nats.go clients, one connection per side shared by all its goroutines, as NATS programs
// use them.

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/iacp-node/iacp-node/protocol"
)

// The agent ids in the signed NATS documents.
const (
	natsSender   = "bench:nats:a"
	natsReceiver = "bench:nats:b"
)

// natsTimeout bounds every request and JetStream call.
const natsTimeout = 30 * time.Second

// sigHeader is the NATS header that carries a sealed document's signature.
const sigHeader = "Iacp-Sig"

// signedMsg is a NATS message of a sealed document and its signature.
func signedMsg(subject string, doc []byte, sig string) *nats.Msg {
	return &nats.Msg{Subject: subject, Data: doc, Header: nats.Header{sigHeader: []string{sig}}}
}

// openMsg opens the sealed document of m.
func openMsg(s *signer, m *nats.Msg) (envelope, error) {
	return s.open(m.Data, m.Header.Get(sigHeader))
}

// natsServer starts an embedded server listening on a kernel-chosen port of 127.0.0.1; with
// jetStream, JetStream stores its files in a temporary directory and, with syncAlways, fsyncs
// every write (the default syncs every 2 minutes). Cleanup shuts it down and waits for it.
func natsServer(tb testing.TB, jetStream, syncAlways bool) *server.Server {
	tb.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: jetStream, SyncAlways: syncAlways}
	if jetStream {
		opts.StoreDir = tb.TempDir()
	}
	s, err := server.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	s.Start()
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start")
	}
	return s
}

// natsConn connects a client to s. Cleanup closes it (before s shuts down: cleanups run last
// registered first).
func natsConn(tb testing.TB, s *server.Server) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// receiverWorkers is how many subscriptions (or consumers) verify at once on the receiving
// side of the one-way systems: one per P, as IACP's receiver verifies on several goroutines.
func receiverWorkers() int { return runtime.GOMAXPROCS(0) }

// natsRTT returns one request/reply over its own server: with signed false the 1 KiB payload
// is sent as encoded once and answered with a constant {"status":"accepted"}; with signed true
// the requester seals (encodes, canonicalises, hashes, signs) the payload in an envelope, the
// replier opens (verifies and decodes) it and seals a signed {"status":"accepted"} response,
// which the requester opens: IACP's work per exchange.
func natsRTT(tb testing.TB, signed bool) func(context.Context) error {
	tb.Helper()
	s := natsServer(tb, false, false)
	requester, replier := natsConn(tb, s), natsConn(tb, s)
	const subject = "bench.rtt"
	payload := payload1K()
	var handler nats.MsgHandler
	var request func() (*nats.Msg, error)
	var check func(*nats.Msg) error
	if signed {
		a, b := signerPair(tb, natsSender, natsReceiver)
		handler = func(m *nats.Msg) {
			env, err := openMsg(b, m)
			var doc []byte
			var sig string
			if err == nil {
				doc, sig, err = b.seal(env.From, "response", env.Intent, env.MessageID, map[string]string{"status": protocol.ResponseAccepted})
			}
			if err != nil {
				doc, sig = []byte("refused: "+err.Error()), ""
			}
			_ = m.RespondMsg(signedMsg(m.Reply, doc, sig))
		}
		request = func() (*nats.Msg, error) {
			doc, sig, err := a.seal(natsReceiver, "request", "handoff", "", payload)
			return signedMsg(subject, doc, sig), err
		}
		check = func(m *nats.Msg) error { _, err := openMsg(a, m); return err }
	} else {
		body, err := json.Marshal(payload)
		if err != nil {
			tb.Fatal(err)
		}
		accepted := []byte(`{"status":"accepted"}`)
		handler = func(m *nats.Msg) { _ = m.Respond(accepted) }
		request = func() (*nats.Msg, error) { return &nats.Msg{Subject: subject, Data: body}, nil }
		check = func(*nats.Msg) error { return nil }
	}
	if _, err := replier.Subscribe(subject, handler); err != nil {
		tb.Fatal(err)
	}
	if err := replier.Flush(); err != nil {
		tb.Fatal(err)
	}
	return func(context.Context) error {
		req, err := request()
		if err != nil {
			return err
		}
		m, err := requester.RequestMsg(req, natsTimeout)
		if err != nil {
			return err
		}
		return check(m)
	}
}

// natsSignedBytes is the size of the signed request natsRTT sends, document and signature
// header, for the report.
func natsSignedBytes(tb testing.TB) int {
	tb.Helper()
	a, _ := signerPair(tb, natsSender, natsReceiver)
	doc, sig, err := a.seal(natsReceiver, "request", "handoff", "", payload1K())
	if err != nil {
		tb.Fatal(err)
	}
	return len(doc) + len(sigHeader) + len(": \r\n") + len(sig)
}

// receiverCount counts the messages a one-way receiver verified and keeps its first error.
type receiverCount struct {
	n     atomic.Int64
	mu    sync.Mutex
	first error
}

// done counts one message, or records err.
func (c *receiverCount) done(err error) {
	if err == nil {
		c.n.Add(1)
		return
	}
	c.mu.Lock()
	if c.first == nil {
		c.first = err
	}
	c.mu.Unlock()
}

// load returns the count and the first error.
func (c *receiverCount) load() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n.Load(), c.first
}

// signedEvent seals the one-way systems' event, the payload of IACP's notify events, in a
// message to subject.
func signedEvent(a *signer, subject string) (*nats.Msg, error) {
	doc, sig, err := a.seal(natsReceiver, "event", "notify", "", protocol.EventPayload{EventType: "tick"})
	return signedMsg(subject, doc, sig), err
}

// natsCoreOneWay returns core NATS publish of a signed event: fire and forget, no
// acknowledgement (at most once), received by receiverWorkers queue subscriptions that each
// open (verify and decode) what they get.
func natsCoreOneWay(tb testing.TB) onewaySystem {
	tb.Helper()
	s := natsServer(tb, false, false)
	pub, sub := natsConn(tb, s), natsConn(tb, s)
	a, b := signerPair(tb, natsSender, natsReceiver)
	const subject = "bench.oneway"
	var count receiverCount
	for range receiverWorkers() {
		if _, err := sub.QueueSubscribe(subject, "verifiers", func(m *nats.Msg) {
			_, err := openMsg(b, m)
			count.done(err)
		}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := sub.Flush(); err != nil {
		tb.Fatal(err)
	}
	return onewaySystem{
		send: func(context.Context) error {
			m, err := signedEvent(a, subject)
			if err != nil {
				return err
			}
			return pub.PublishMsg(m)
		},
		received: count.load,
	}
}

// natsAckedOneWay returns a signed event sent as a core NATS request and answered, once the
// receiver has opened it, by a signed receipt that the sender opens: the acknowledgement IACP
// gives every one-way message, on NATS without storage.
func natsAckedOneWay(tb testing.TB) onewaySystem {
	tb.Helper()
	s := natsServer(tb, false, false)
	pub, sub := natsConn(tb, s), natsConn(tb, s)
	a, b := signerPair(tb, natsSender, natsReceiver)
	const subject = "bench.acked"
	var count receiverCount
	for range receiverWorkers() {
		if _, err := sub.QueueSubscribe(subject, "verifiers", func(m *nats.Msg) {
			env, err := openMsg(b, m)
			var doc []byte
			var sig string
			if err == nil {
				doc, sig, err = b.seal(env.From, "receipt", env.Intent, env.MessageID, map[string]string{"status": "received"})
			}
			count.done(err)
			if err != nil {
				doc, sig = []byte("refused: "+err.Error()), ""
			}
			_ = m.RespondMsg(signedMsg(m.Reply, doc, sig))
		}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := sub.Flush(); err != nil {
		tb.Fatal(err)
	}
	return onewaySystem{
		send: func(context.Context) error {
			m, err := signedEvent(a, subject)
			if err != nil {
				return err
			}
			if m, err = pub.RequestMsg(m, natsTimeout); err != nil {
				return err
			}
			_, err = openMsg(a, m)
			return err
		},
		received: count.load,
	}
}

// jetStreamOneWay returns JetStream publish of a signed event to a file-store stream, each
// publish waiting for the server's acknowledgement that the stream stored it (written to the
// file; fsynced before the acknowledgement only with syncAlways), consumed by receiverWorkers
// pulls of one durable consumer that open each message and acknowledge it (explicit acks).
// Cleanup stops the consumers.
func jetStreamOneWay(tb testing.TB, syncAlways bool) onewaySystem {
	tb.Helper()
	s := natsServer(tb, true, syncAlways)
	pubConn, subConn := natsConn(tb, s), natsConn(tb, s)
	a, b := signerPair(tb, natsSender, natsReceiver)
	const subject = "bench.js"
	ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
	defer cancel()
	pubJS, err := jetstream.New(pubConn)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := pubJS.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		tb.Fatal(err)
	}
	subJS, err := jetstream.New(subConn)
	if err != nil {
		tb.Fatal(err)
	}
	cons, err := subJS.CreateOrUpdateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "verifiers", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		tb.Fatal(err)
	}
	var count receiverCount
	for range receiverWorkers() {
		cc, err := cons.Consume(func(m jetstream.Msg) {
			_, err := b.open(m.Data(), m.Headers().Get(sigHeader))
			if err == nil {
				err = m.Ack()
			}
			count.done(err)
		})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			cc.Stop()
			select {
			case <-cc.Closed():
			case <-time.After(10 * time.Second):
				tb.Error("a JetStream consumer did not stop")
			}
		})
	}
	return onewaySystem{
		send: func(ctx context.Context) error {
			m, err := signedEvent(a, subject)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, natsTimeout)
			defer cancel()
			ack, err := pubJS.PublishMsg(ctx, m)
			if err == nil && ack.Duplicate {
				err = errors.New("JetStream: duplicate")
			}
			return err
		},
		received: count.load,
	}
}
