package trust

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

func TestMain(m *testing.M) {
	testsupport.VerifyTestMain(m, testsupport.MocknetPipes(), testsupport.ProcessWorkers())
}

func agentName(i int) string { return fmt.Sprintf("test:mesh:agent%d", i) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func expectCode(t *testing.T, got, want protocol.Code) {
	t.Helper()
	if got != want {
		t.Fatalf("refused with %q, want %q", got, want)
	}
}

// parts is the trust parts of n peers on one mocknet, linked and connected, as the nodes of a
// mesh would hold them.
type parts struct {
	net  *testsupport.Net
	t    []*Trust
	auth *authority.Authority // the mesh authority, when certified
}

func (ps *parts) id(i int) peer.ID { return ps.net.Hosts[i].ID() }

// newParts starts n parts on a mocknet; config(i, c, hosts) adjusts part i's configuration
// (its host, agent agentName(i), a data directory of its own and a discarding logger are set).
// They close with the test.
func newParts(t testing.TB, n int, config func(i int, c *Config, hosts []host.Host)) *parts {
	t.Helper()
	net := testsupport.Mocknet(t, n, testsupport.FirstPort(5000))
	ps := &parts{net: net}
	for i := range n {
		c := Config{Host: net.Hosts[i], AgentID: agentName(i), DataDir: t.TempDir(), Log: slog.New(slog.DiscardHandler)}
		if config != nil {
			config(i, &c, net.Hosts)
		}
		p, err := New(c)
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		t.Cleanup(func() { p.Close() })
		ps.t = append(ps.t, p)
	}
	return ps
}

// certifiedParts starts n parts under one mesh authority, which part 0 holds (founded, with
// its registry). Part i is certified for agentName(i) and recorded as if it had joined by
// invitation, except the parts listed in open: they run open, with no certificate, as an
// attacker's would.
func certifiedParts(t testing.TB, n int, open ...int) *parts {
	t.Helper()
	a, err := authority.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ps := newParts(t, n, func(i int, c *Config, hosts []host.Host) {
		for _, o := range open {
			if o == i {
				c.Mode = Open
				return
			}
		}
		if i == 0 {
			c.MeshAuthority = a
			return
		}
		id := c.Host.ID()
		cert, err := a.Issue(authority.CertRequest{AgentID: c.AgentID, Peer: id})
		if err != nil {
			t.Fatal(err)
		}
		c.Authority, c.Certificate, c.AuthorityNode = a.ID(), cert.Raw, hosts[0].ID().String()
	})
	ps.auth = a
	for i := 1; i < n; i++ {
		if c := ps.t[i].certs; c != nil {
			if err := ps.t[0].reg.Record(c.own.Load()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ps
}

// addHost puts one more host on the mocknet, linked and connected to the others.
func (ps *parts) addHost(t testing.TB, port int) (host.Host, peer.ID) {
	t.Helper()
	h, _ := ps.net.AddHost(t, port)
	if err := ps.net.LinkAll(); err != nil {
		t.Fatal(err)
	}
	return h, h.ID()
}
