package bench

// The floor of the round-trip comparison: a framed 1 KiB echo between two go-libp2p hosts
// built with the node's transport stack (TCP on loopback, Noise, yamux) on one reused stream,
// as node/bench_test.go measures it, but without a node around the hosts.

import (
	"bufio"
	"context"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/iacp-node/iacp-node/protocol"
)

// echoProtocol is the raw echo's libp2p protocol: length-prefixed frames sent back as read.
const echoProtocol = "/iacp-bench/echo/1.0.0"

// echoHost builds a go-libp2p host on a kernel-chosen TCP port of 127.0.0.1 with the transport,
// security and muxer the node uses over TCP. Cleanup closes it.
func echoHost(tb testing.TB) host.Host {
	tb.Helper()
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.DisableRelay(),
	)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

// echoRTT starts two hosts, the second echoing frames, and returns one 1 KiB round trip on a
// stream opened once. Cleanup closes the stream and both hosts.
func echoRTT(tb testing.TB) func(context.Context) error {
	tb.Helper()
	client, server := echoHost(tb), echoHost(tb)
	server.SetStreamHandler(echoProtocol, func(s network.Stream) {
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
	ctx := context.Background()
	if err := client.Connect(ctx, peer.AddrInfo{ID: server.ID(), Addrs: server.Addrs()}); err != nil {
		tb.Fatal(err)
	}
	s, err := client.NewStream(ctx, server.ID(), echoProtocol)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	br := bufio.NewReader(s)
	frame := []byte(stringOf(1024))
	return func(context.Context) error {
		if err := protocol.WriteFrame(s, frame); err != nil {
			return err
		}
		_, err := protocol.ReadFrame(br, 1<<20)
		return err
	}
}
