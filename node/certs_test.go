package node

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
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

// Only a peer's answer is a verdict on its certificate. A peer that cannot be reached gives
// none: the fetch fails with an error to try again after (AGENT_NOT_FOUND), and nothing is
// remembered, so the certificate is fetched as soon as the peer is back. A peer that answers
// without a certificate has none: IDENTITY_INVALID, remembered for certRetryAfter.
func TestCertificates_AnUnreachablePeerIsNoVerdict(t *testing.T) {
	m, _ := certifiedMesh(t, 3)
	alice, bob := m.nodes[1], m.nodes[2]
	alice.certs.byPeer.Remove(bob.ID())
	if err := m.mn.UnlinkPeers(alice.ID(), bob.ID()); err != nil {
		t.Fatal(err)
	}
	_ = m.mn.DisconnectPeers(alice.ID(), bob.ID())
	err := alice.certs.verify(testCtx(t), agentName(2), bob.ID(), "")
	if code := protocol.CodeOf(err); code != protocol.CodeAgentNotFound {
		t.Fatalf("fetching the certificate of an unreachable peer: %v (code %q); want AGENT_NOT_FOUND", err, code)
	}
	if err := alice.certs.check(agentName(2), bob.ID()); !errors.Is(err, errNoCert) {
		t.Fatalf("after bob could not be reached his claim gives %v; want no verdict yet", err)
	}
	if _, err := m.mn.LinkPeers(alice.ID(), bob.ID()); err != nil {
		t.Fatal(err)
	}
	if err := alice.certs.verify(testCtx(t), agentName(2), bob.ID(), ""); err != nil {
		t.Fatalf("bob's certificate once he is back: %v", err)
	}

	// A caller that waited for another's fetch, which reached no verdict, is told to try
	// again, not that bob has no certificate.
	alice.certs.byPeer.Remove(bob.ID())
	other := make(chan struct{})
	alice.certs.mu.Lock()
	alice.certs.inflight[bob.ID()] = &pendingFetch{done: other}
	alice.certs.mu.Unlock()
	close(other) // it found nothing
	err = alice.certs.verify(testCtx(t), agentName(2), bob.ID(), "")
	if protocol.CodeOf(err) != protocol.CodeAgentNotFound {
		t.Fatalf("after another caller's fetch failed: %v (code %q); want AGENT_NOT_FOUND", err, protocol.CodeOf(err))
	}
	alice.certs.mu.Lock()
	delete(alice.certs.inflight, bob.ID())
	alice.certs.mu.Unlock()

	// bob answers, without a certificate: that is a verdict.
	alice.certs.byPeer.Remove(bob.ID())
	bob.host.SetStreamHandler(CertProtocolID, func(s network.Stream) {
		defer s.Close()
		if _, err := protocol.ReadFrame(s, maxCertRequest); err == nil {
			_ = protocol.WriteFrame(s, []byte(`{}`))
		}
	})
	err = alice.certs.verify(testCtx(t), agentName(2), bob.ID(), "")
	if code := protocol.CodeOf(err); code != protocol.CodeIdentityInvalid {
		t.Fatalf("a peer answering without a certificate: %v (code %q); want IDENTITY_INVALID", err, code)
	}
	if err := alice.certs.check(agentName(2), bob.ID()); protocol.CodeOf(err) != protocol.CodeIdentityInvalid {
		t.Fatalf("after bob answered without a certificate his claim gives %v; want the remembered refusal", err)
	}
}
