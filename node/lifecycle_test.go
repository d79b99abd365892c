package node

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/iacp-node/iacp-node/identity"
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
