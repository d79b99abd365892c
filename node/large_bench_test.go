package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// BenchmarkInbound16MiB follows one signed event of almost 16 MiB from the stream to the store,
// on a node with the defaults `iacp-node run` uses (durable delivery, the audit log with
// payloads, the inbox) in open mode: read, decode, canonicalise and verify, validate, the
// journal's write and the store's, the audit entry, the inbox, and the agent taking it (the
// store's acknowledgement). The sender is a bare libp2p host on TCP loopback that writes a
// frame built beforehand (outside the clock), so that B/op is what the node allocates for one
// message, and what the transport does.
//
//	go test -run '^$' -bench Inbound16MiB -benchtime 20x ./node
func BenchmarkInbound16MiB(b *testing.B) {
	n, err := New(WithAgent("bench:host:b", protocolManifest()), WithDataDir(b.TempDir()), WithInbox(true),
		WithListen("/ip4/127.0.0.1/tcp/0"), WithNAT(false), WithDiscovery(false), WithGossip(false),
		WithLogger(slog.New(slog.DiscardHandler)), WithRateLimit(1e6, 1<<20))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	sk, _, _ := crypto.GenerateEd25519Key(nil)
	h, err := libp2p.New(libp2p.Identity(sk), libp2p.NoListenAddrs, libp2p.DisableRelay())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	bld, err := protocol.NewBuilder("bench:host:a", sk, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
		b.Fatal(err)
	}
	s, err := h.NewStream(ctx, n.ID(), ProtocolID)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Reset()
	br := bufio.NewReader(s)
	pad := strings.Repeat("a", 16<<20-4096)
	b.ReportAllocs()
	var size int
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		m, err := bld.Event("bench:host:b", protocol.IntentNotify, protocol.EventPayload{EventType: "bench", Detail: pad})
		if err != nil {
			b.Fatal(err)
		}
		doc, err := protocol.EncodeJSON(m)
		if err != nil {
			b.Fatal(err)
		}
		size = len(doc)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(doc)))
		b.StartTimer()
		if _, err := s.Write(hdr[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Write(doc); err != nil {
			b.Fatal(err)
		}
		raw, err := protocol.ReadFrame(br, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		if r, err := protocol.DecodeJSON(raw); err != nil || receiptOf(r) == nil {
			b.Fatalf("the node answered %s (%v), not a receipt", raw, err)
		}
		if err := n.Inbox().Ack(m.Envelope.MessageID); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
	}
	b.SetBytes(int64(size))
}
