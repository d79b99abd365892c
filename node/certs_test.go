package node

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
)

// A node whose certificate expired still shows it when asked, so that a peer refusing it
// names the rule that failed (expired). It used to drop its own certificate from its book at
// its first check after the expiry, and then answered with none: peers refused it for
// "parse: not a compact JWS", naming the wrong rule.
func TestCertificates_AnExpiredCertificateIsRefusedAsExpired(t *testing.T) {
	var ahead atomic.Int64 // how far both nodes' clocks run ahead of time.Now
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	a, err := authority.Generate()
	if err != nil {
		t.Fatal(err)
	}
	m := newMesh(t, 2, []Option{WithClock(clock)}, func(i int, m *mesh) []Option {
		if i == 0 {
			return []Option{WithMeshAuthority(a)}
		}
		id, _ := peer.IDFromPrivateKey(m.keys[i])
		c, err := a.Issue(authority.CertRequest{AgentID: agentName(i), Peer: id, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return []Option{WithAuthority(a.ID(), c.Raw)}
	})
	alice, bob := m.nodes[0], m.nodes[1]
	ahead.Store(int64(2 * time.Hour)) // bob's certificate expired an hour ago
	if err := bob.certs.check(agentName(1), bob.ID()); err == nil {
		t.Fatal("bob's own check took his expired certificate")
	}
	err = alice.certs.verify(testCtx(t), agentName(1), bob.ID(), "")
	if err == nil || !strings.Contains(err.Error(), ": expired: ") {
		t.Fatalf("alice's refusal of bob's expired certificate: %v; want one naming the check (expired)", err)
	}
}
