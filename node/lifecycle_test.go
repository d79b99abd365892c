package node

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/identity"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// The identity key is created on first start with mode 0600 and reused after; Close is safe
// twice. (A real host with TCP and QUIC on loopback, as `iacp-node run` builds it.)
func TestLifecycle_KeyCreatedOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	start := func() *Node {
		n, err := New(WithDataDir(dir), WithAgent("test:life:a", protocolManifest()), WithNAT(false),
			WithListen("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"),
			WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n1 := start()
	id1 := n1.ID()
	if len(n1.Addrs()) < 2 {
		t.Fatalf("want TCP and QUIC listen addrs, got %v", n1.Addrs())
	}
	if err := n1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", st.Mode().Perm())
	}
	n2 := start()
	defer n2.Close()
	if n2.ID() != id1 {
		t.Fatalf("restart changed the peer id: %s then %s", id1, n2.ID())
	}
	k, err := identity.Load(filepath.Join(dir, KeyFile))
	if err != nil || identity.PeerID(k) != id1 {
		t.Fatalf("key file does not hold the node's key: %v", err)
	}
}

// Bad configuration is refused with the field's name.
func TestConfig_ValidateNamesTheField(t *testing.T) {
	_, err := New(WithDataDir(t.TempDir()), WithAgent("not-an-agent-id", protocolManifest()))
	if err == nil || !contains(err.Error(), "agent_id") {
		t.Fatalf("err = %v, want one naming agent_id", err)
	}
	_, err = New(WithDataDir(t.TempDir()), WithAgent("a:b:c", protocolManifest()), WithRateLimit(0, 1))
	if err == nil || !contains(err.Error(), "rate_per_second") {
		t.Fatalf("err = %v, want one naming rate_per_second", err)
	}
}

// keptHost is a host whose Close leaves its connections and streams open, as a transport
// can: mocknet's stream opened on a connection its peer is closing outlives both, and ignores
// read deadlines. The node's own goroutines must end on Close without the host's help.
type keptHost struct{ host.Host }

func (keptHost) Close() error { return nil }

// A session opened while Close waits for the exchanges in flight (a handler sending after
// Close took its list of sessions) ends with the node: Close returns, and waits for its reader.
func TestClose_EndsSessionOpenedWhileClosing(t *testing.T) {
	net := testsupport.Mocknet(t, 2, testsupport.FirstPort(4100))
	release, sent := make(chan struct{}), make(chan error, 1)
	a, err := startNode(t, keptHost{net.Hosts[0]}, net.Keys[0], agentName(0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := startNode(t, net.Hosts[1], net.Keys[1], agentName(1))
	if err != nil {
		t.Fatal(err)
	}
	a.AddPeer(agentName(1), peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()})
	b.AddPeer(agentName(0), peer.AddrInfo{ID: a.ID(), Addrs: a.host.Addrs()})
	a.Handle(protocol.IntentNotify, func(context.Context, *Request) error {
		<-release
		ev, err := a.Builder().Event(agentName(1), protocol.IntentNotify, protocol.EventPayload{EventType: "late"})
		if err == nil {
			err = a.Send(testCtx(t), ev) // a session to b, opened after Close's list of them
		}
		sent <- err
		return nil
	})
	ev, err := b.Builder().Event(agentName(0), protocol.IntentNotify, protocol.EventPayload{EventType: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	// Close has taken its list of sessions once it has closed the read side of b's stream
	// and that stream's serving has ended.
	for !a.life.isClosing() || a.inboundStreams() > 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-sent; err != nil {
		t.Fatalf("the handler's send while closing: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a guard against the hang, not a timing
		_ = net.Hosts[0].Close() // resets the streams, so that Close and the test end
		t.Fatal("Close did not return: the session opened while it ran is still read")
	}
}

func (n *Node) inboundStreams() int {
	n.wire.sessionsMu.Lock()
	defer n.wire.sessionsMu.Unlock()
	return len(n.wire.inbound)
}
