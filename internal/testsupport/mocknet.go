package testsupport

import (
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"
)

// Net is an in-memory libp2p network (go-libp2p's mocknet) and the hosts Mocknet made on it:
// Hosts[i] holds the Ed25519 key Keys[i] and listens on /ip4/127.0.0.1/tcp/<first port + i>.
// The embedded Mocknet links, unlinks, connects and disconnects them.
type Net struct {
	mocknet.Mocknet
	Hosts []host.Host
	Keys  []crypto.PrivKey
}

// A MeshOption changes how Mocknet builds its network.
type MeshOption func(*meshConfig)

type meshConfig struct {
	port    int
	connect bool
}

// FirstPort is the port of host 0's address (default 4000); host i has FirstPort + i.
func FirstPort(port int) MeshOption { return func(c *meshConfig) { c.port = port } }

// LinkOnly links the hosts without connecting them: they find each other themselves (through
// a bootstrap peer) or the test connects the pairs it wants.
func LinkOnly() MeshOption { return func(c *meshConfig) { c.connect = false } }

// Mocknet makes n hosts with fresh Ed25519 keys on a new mocknet, links every pair and,
// unless LinkOnly, connects every pair. The network and its hosts close when the test ends,
// after whatever the caller registers with tb.Cleanup afterwards (the nodes on the hosts).
func Mocknet(tb testing.TB, n int, opts ...MeshOption) *Net {
	tb.Helper()
	c := meshConfig{port: 4000, connect: true}
	for _, o := range opts {
		o(&c)
	}
	net := &Net{Mocknet: mocknet.New()}
	tb.Cleanup(func() { _ = net.Close() })
	for i := range n {
		h, sk := net.AddHost(tb, c.port+i)
		net.Hosts, net.Keys = append(net.Hosts, h), append(net.Keys, sk)
	}
	if err := net.LinkAll(); err != nil {
		tb.Fatal(err)
	}
	if c.connect {
		if err := net.ConnectAllButSelf(); err != nil {
			tb.Fatal(err)
		}
	}
	return net
}

// AddHost makes one more host, with a fresh Ed25519 key, listening on
// /ip4/127.0.0.1/tcp/<port>. It is neither linked nor connected, nor added to Hosts.
func (net *Net) AddHost(tb testing.TB, port int) (host.Host, crypto.PrivKey) {
	tb.Helper()
	sk := Key(tb)
	h, err := net.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)))
	if err != nil {
		tb.Fatal(err)
	}
	return h, sk
}

// Key returns a fresh Ed25519 private key.
func Key(tb testing.TB) crypto.PrivKey {
	tb.Helper()
	sk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return sk
}
