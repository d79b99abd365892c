package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/protocol"
)

// mesh is a set of nodes on one in-memory network, each knowing where the others are.
type mesh struct {
	mn    mocknet.Mocknet
	nodes []*Node
	keys  []crypto.PrivKey
}

func agentName(i int) string { return fmt.Sprintf("test:mesh:agent%d", i) }

// newMesh starts n nodes; opts apply to every node, perNode to node i.
func newMesh(t testing.TB, n int, opts []Option, perNode func(i int, m *mesh) []Option) *mesh {
	t.Helper()
	m := &mesh{mn: mocknet.New()}
	t.Cleanup(func() { m.mn.Close() })
	for i := 0; i < n; i++ {
		nd, _, err := addNode(t, m.mn, 4000+i, agentName(i), func(sk crypto.PrivKey) []Option {
			m.keys = append(m.keys, sk) // perNode may use node i's key
			if perNode == nil {
				return opts
			}
			return append(append([]Option(nil), opts...), perNode(i, m)...)
		})
		if err != nil {
			t.Fatal(err)
		}
		m.nodes = append(m.nodes, nd)
	}
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := m.mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	for i, a := range m.nodes {
		for j, b := range m.nodes {
			if i != j {
				a.AddPeer(agentName(j), peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()})
			}
		}
	}
	return m
}

// addNode starts one node serving agent on mn at the given port, with the test defaults (no
// discovery, no gossip, a temporary data directory) and then opts(its key). It returns New's
// answer; a node that started is closed with the test.
func addNode(t testing.TB, mn mocknet.Mocknet, port int, agent string, opts func(sk crypto.PrivKey) []Option) (*Node, crypto.PrivKey, error) {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)))
	if err != nil {
		t.Fatal(err)
	}
	nd, err := New(append([]Option{
		WithHost(h, sk),
		WithAgent(agent, protocol.Manifest{Tools: []string{"terminal"}}),
		WithDataDir(t.TempDir()),
		WithLogger(slog.New(slog.DiscardHandler)),
		WithDiscovery(false),
		WithGossip(false),
	}, opts(sk)...)...)
	if err == nil {
		t.Cleanup(func() { nd.Close() })
	}
	return nd, sk, err
}

func peerOf(k crypto.PrivKey) string {
	id, _ := peer.IDFromPrivateKey(k)
	return id.String()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func protocolManifest() protocol.Manifest { return protocol.Manifest{Tools: []string{"terminal"}} }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
