package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// mesh is a set of nodes on one in-memory network, each knowing where the others are.
type mesh struct {
	mn    *testsupport.Net
	nodes []*Node
	keys  []crypto.PrivKey
}

func agentName(i int) string { return fmt.Sprintf("test:mesh:agent%d", i) }

// newMesh starts n nodes on n linked, connected mocknet hosts; opts apply to every node,
// perNode to node i (m.keys holds every node's key, m.nodes the nodes started before i).
func newMesh(t testing.TB, n int, opts []Option, perNode func(i int, m *mesh) []Option) *mesh {
	t.Helper()
	net := testsupport.Mocknet(t, n, testsupport.FirstPort(4000))
	m := &mesh{mn: net, keys: net.Keys}
	for i := range n {
		o := opts
		if perNode != nil {
			o = append(append([]Option(nil), opts...), perNode(i, m)...)
		}
		nd, err := startNode(t, net.Hosts[i], net.Keys[i], agentName(i), o...)
		if err != nil {
			t.Fatal(err)
		}
		m.nodes = append(m.nodes, nd)
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

// startNode starts one node serving agent on h, with the test defaults (no discovery, no
// gossip, a temporary data directory) and then opts. It returns New's answer; a node that
// started is closed with the test.
func startNode(t testing.TB, h host.Host, sk crypto.PrivKey, agent string, opts ...Option) (*Node, error) {
	t.Helper()
	nd, err := New(append([]Option{
		WithHost(h, sk),
		WithAgent(agent, protocol.Manifest{Tools: []string{"terminal"}}),
		WithDataDir(t.TempDir()),
		WithLogger(slog.New(slog.DiscardHandler)),
		WithDiscovery(false),
		WithGossip(false),
	}, opts...)...)
	if err == nil {
		t.Cleanup(func() { nd.Close() })
	}
	return nd, err
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
