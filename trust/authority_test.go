package trust

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
)

func issue(t *testing.T, a *authority.Authority, agent string, p peer.ID) string {
	t.Helper()
	c, err := a.Issue(authority.CertRequest{AgentID: agent, Peer: p})
	if err != nil {
		t.Fatal(err)
	}
	return c.Raw
}

// A forged heartbeat once pinned an agent to the attacker on every node that heard it. Under
// a mesh authority gossip takes a message only when its author holds a verified certificate
// for its sender id; an author without one is asked for it before the message is taken, and
// taught nothing when it has none.
func TestTrustAuthority_HeartbeatsNeedTheAuthorsCertificate(t *testing.T) {
	ps := certifiedParts(t, 3, 2)
	alice := ps.t[0]
	carol := "test:mesh:carol"
	if alice.certs.verify(t.Context(), carol, ps.id(2), ps.id(2)) == nil {
		t.Fatal("gossip would take mallory's heartbeat for carol")
	}
	if err := alice.certs.check(carol, ps.id(2)); err == nil || errors.Is(err, errNoCert) {
		t.Fatalf("after the fetch, mallory's claim gives %v, want a refusal", err)
	}
	if learn, err := alice.Heard(carol, ps.id(2)); learn || err == nil {
		t.Fatal("a heartbeat without a certificate would teach where carol is")
	}
	// bob's heartbeat, relayed by carol... here by bob himself: its certificate is fetched
	// while the beat waits, then held.
	if err := alice.certs.verify(t.Context(), agentName(1), ps.id(1), ps.id(1)); err != nil {
		t.Fatalf("bob's certificate was not fetched: %v", err)
	}
	if learn, err := alice.Heard(agentName(1), ps.id(1)); !learn || err != nil {
		t.Fatalf("bob's certificate is not held after the fetch: %v", err)
	}
}

// Joining by invitation: the authority's node issues a one-time invitation; a new node proves
// it holds the secret (for its own peer id and agent id) and gets a certificate that every
// node of the mesh accepts. The invitation works once, only for its agent, and a proof made
// for one peer is worth nothing to another.
func TestTrustAuthority_JoinByInvitation(t *testing.T) {
	ps := certifiedParts(t, 2)
	alice := ps.t[0]
	alice.cfg.Addrs = func() []ma.Multiaddr {
		addrs, _ := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: ps.id(0), Addrs: ps.net.Hosts[0].Addrs()})
		return addrs
	}
	newcomer := "test:mesh:newcomer"
	if _, _, err := ps.t[1].Invite(authority.InviteTerms{}); err == nil {
		t.Fatal("a node that is not the authority issued an invitation")
	}
	token, _, err := alice.Invite(authority.InviteTerms{AgentID: newcomer, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := authority.DecodeInvite(token)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Authority != ps.auth.ID() || len(inv.Addrs) == 0 {
		t.Fatalf("invitation %+v", inv)
	}
	port := 5100
	joiner := func() host.Host {
		port++
		h, _ := ps.addHost(t, port)
		return h
	}
	h := joiner()
	if _, err := Join(testCtx(t), h, inv, "test:mesh:someone-else", nil); err == nil {
		t.Fatal("an invitation bound to one agent let another join")
	}
	cert, err := Join(testCtx(t), h, inv, newcomer, []string{"tool:terminal"})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if cert.AgentID != newcomer || cert.Peer != h.ID() {
		t.Fatalf("certificate for %s on %s", cert.AgentID, cert.Peer)
	}
	if _, err := alice.certs.v.Certificate(cert.Raw, h.ID(), newcomer); err != nil {
		t.Fatalf("the mesh does not accept the joined certificate: %v", err)
	}
	// A joiner whose answer was lost (it timed out while the authority's node was busy) asks
	// again, and is given the same certificate: the invitation is not burnt.
	if again, err := Join(testCtx(t), h, inv, newcomer, nil); err != nil || again.Raw != cert.Raw {
		t.Fatalf("joining again from the same peer: %v; want the certificate given the first time", err)
	}
	if _, err := Join(testCtx(t), joiner(), inv, newcomer, nil); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a used invitation let a second peer join: %v", err)
	}
}

// The certificate protocol answers anyone, so each request is charged to the asking peer's
// message rate: a peer over its rate gets its stream reset, not another answer (or another
// copy of the revocation list).
func TestTrustAuthority_CertificateRequestsAreCharged(t *testing.T) {
	var asked atomic.Int32
	ps := certifiedParts(t, 2)
	ps.t[0].certs.allow = func(peer.ID) error {
		if asked.Add(1) > 1 {
			return protocol.Errorf(protocol.CodeRateLimited, "over its rate")
		}
		return nil
	}
	ask := func() error {
		_, err := ps.t[1].certs.ask(testCtx(t), ps.id(0), ps.id(0))
		return err
	}
	if err := ask(); err != nil {
		t.Fatalf("the first request: %v", err)
	}
	if err := ask(); err == nil {
		t.Fatal("a peer over its rate got a second answer")
	}
}

// Only a peer's own answer is a verdict on its certificate: a relayer that cannot or will not
// hand over bob's certificate does not get bob refused (before, bob was remembered as failed
// for 30 s, and his direct messages refused with him).
func TestTrustAuthority_ARelayerIsNoVerdictOnTheAuthor(t *testing.T) {
	ps := certifiedParts(t, 3, 2)
	alice, mallory := ps.t[0], ps.net.Hosts[2]
	// mallory answers every request with a certificate that binds bob's id to her own peer
	forged := issue(t, ps.auth, agentName(1), mallory.ID())
	mallory.SetStreamHandler(CertProtocolID, func(s network.Stream) {
		defer s.Close()
		if _, err := protocol.ReadFrame(s, maxCertRequest); err != nil {
			return
		}
		raw, _ := json.Marshal(certAnswer{Cert: forged})
		_ = protocol.WriteFrame(s, raw)
	})
	if err := alice.certs.fetch(testCtx(t), ps.id(1), mallory.ID(), false); err == nil {
		t.Fatal("a certificate for mallory's peer passed for bob's")
	}
	if err := alice.certs.check(agentName(1), ps.id(1)); !errors.Is(err, errNoCert) {
		t.Fatalf("after mallory's failure bob's claim gives %v; want no verdict yet", err)
	}
	if err := alice.Claim(testCtx(t), agentName(1), ps.id(1), SourceMessage); err != nil {
		t.Fatalf("bob was refused after a relayer failed: %v", err)
	}
}

// The peers asked for the mesh authority are authority_node when set, else the bootstrap
// peers the node hands over, in their order.
func TestTrustAuthority_TheAuthorityIsAskedAtItsNodeOrTheBootstrapPeers(t *testing.T) {
	ps := certifiedParts(t, 3)
	tr := ps.t[1]
	if got := tr.authorityPeers(); len(got) != 1 || got[0] != ps.id(0) {
		t.Fatalf("with authority_node: %v; want the authority's node alone", got)
	}
	tr.cfg.AuthorityNode = ""
	tr.cfg.Bootstrap = []peer.ID{ps.id(2), ps.id(0)}
	if got := tr.authorityPeers(); len(got) != 2 || got[0] != ps.id(2) || got[1] != ps.id(0) {
		t.Fatalf("without it: %v; want the bootstrap peers in their order", got)
	}
}
