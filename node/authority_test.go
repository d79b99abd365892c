package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// certifiedMesh starts n nodes under one mesh authority, which node 0 holds. Node i is
// certified for agentName(i), except the nodes listed in open: they run in open mode with no
// certificate, as an attacker's node would.
func certifiedMesh(t *testing.T, n int, open ...int) (*mesh, *authority.Authority) {
	t.Helper()
	return certifiedMeshWith(t, n, nil, open...)
}

// certifiedMeshWith is certifiedMesh with opts for every node.
func certifiedMeshWith(t *testing.T, n int, opts []Option, open ...int) (*mesh, *authority.Authority) {
	t.Helper()
	return certifiedMeshGrants(t, n, opts, nil, open...)
}

// certifiedMeshGrants is certifiedMeshWith whose node i's certificate grants the permissions
// grants[i].
func certifiedMeshGrants(t *testing.T, n int, opts []Option, grants map[int][]string, open ...int) (*mesh, *authority.Authority) {
	t.Helper()
	a, err := authority.Generate()
	if err != nil {
		t.Fatal(err)
	}
	m := newMesh(t, n, opts, func(i int, m *mesh) []Option {
		for _, o := range open {
			if o == i {
				return []Option{WithTrust(TrustOpen)}
			}
		}
		if i == 0 {
			return []Option{WithMeshAuthority(a)}
		}
		id, _ := peer.IDFromPrivateKey(m.keys[i])
		c, err := a.Issue(authority.CertRequest{AgentID: agentName(i), Peer: id, Permissions: grants[i]})
		if err != nil {
			t.Fatal(err)
		}
		if auth := m.nodes[0]; auth.registry != nil { // as if it had joined by invitation
			if err := auth.registry.Record(c); err != nil {
				t.Fatal(err)
			}
		}
		return []Option{WithAuthority(a.ID(), c.Raw), WithAuthorityNode(m.nodes[0].ID())}
	})
	return m, a
}

// Issue 14, attack 1: one signed message claiming bob, sent before bob ever spoke, pinned bob
// to the attacker. Under a mesh authority the claim is refused (mallory holds no certificate
// for bob), nothing is bound, the real bob is never refused, and alice's messages for bob
// reach bob.
func TestTrustAuthority_AClaimWithoutACertificateIsRefused(t *testing.T) {
	m, _ := certifiedMesh(t, 3, 2)
	alice, bob, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	if alice.TrustMode() != TrustAuthority || mallory.TrustMode() != TrustOpen {
		t.Fatalf("modes %s and %s", alice.TrustMode(), mallory.TrustMode())
	}
	posing, _ := protocol.NewBuilder(agentName(1), m.keys[2], nil)
	c := dialRaw(t, mallory, alice)
	code, perr := c.refusal(event(t, posing, agentName(0)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if !strings.Contains(perr.Message, "certificate") {
		t.Fatalf("the refusal does not say what failed: %q", perr.Message)
	}
	// Not even for its own id: a node without a certificate can send nothing anyone acts on.
	code, _ = c.refusal(event(t, mallory.Builder(), agentName(0)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if _, ok := alice.directory.Peek(agentName(1)); ok {
		if p, _ := alice.directory.Peek(agentName(1)); p == mallory.ID() {
			t.Fatal("a refused claim taught alice's directory that mallory is bob")
		}
	}
	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(0))); err != nil {
		t.Fatalf("the real bob was refused: %v", err)
	}
	if err := alice.Send(testCtx(t), event(t, alice.Builder(), agentName(1))); err != nil {
		t.Fatalf("alice to bob: %v", err)
	}
}

// A certificate binds one agent id to one peer: bob's certificate does not let its holder
// speak as alice, and a certificate copied to another peer does not verify (cnf).
func TestTrustAuthority_ACertificateBindsOneAgentToOnePeer(t *testing.T) {
	m, a := certifiedMesh(t, 3)
	alice, bob, carol := m.nodes[0], m.nodes[1], m.nodes[2]
	posing, _ := protocol.NewBuilder(agentName(2), m.keys[1], nil) // bob's key, carol's id
	code, perr := dialRaw(t, bob, alice).refusal(event(t, posing, agentName(0)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if !strings.Contains(perr.Message, "certified for agent "+agentName(1)) {
		t.Fatalf("refusal %q does not name the certified agent", perr.Message)
	}
	bobs := bob.certs.own.Load().Raw
	if _, err := alice.certs.v.Certificate(bobs, carol.ID(), agentName(1)); err == nil {
		t.Fatal("bob's certificate verified for carol's peer")
	}
	// The authority moves nobody silently: a certificate for bob issued to carol's peer is
	// a different certificate, and bob's own keeps working.
	if _, err := a.Issue(authority.CertRequest{AgentID: agentName(1), Peer: carol.ID()}); err != nil {
		t.Fatal(err)
	}
	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(0))); err != nil {
		t.Fatal(err)
	}
}

// Issue 14, attack 2: a forged heartbeat claiming carol pinned carol to the attacker on every
// node that heard it. Under a mesh authority gossip takes a message only when its author
// holds a verified certificate for its sender id; an author without one is asked for it
// before the message is taken, and taught nothing when it has none.
func TestTrustAuthority_HeartbeatsNeedTheAuthorsCertificate(t *testing.T) {
	m, _ := certifiedMesh(t, 3, 2)
	alice, bob, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	carol := "test:mesh:carol"
	if alice.certs.verify(t.Context(), carol, mallory.ID(), mallory.ID()) == nil {
		t.Fatal("gossip would take mallory's heartbeat for carol")
	}
	if err := alice.certs.check(carol, mallory.ID()); err == nil || errors.Is(err, errNoCert) {
		t.Fatalf("after the fetch, mallory's claim gives %v, want a refusal", err)
	}
	alice.heardLiveness(pubsub.Transition{AgentID: carol, PeerID: mallory.ID(), To: pubsub.StateAlive})
	if _, ok := alice.directory.Peek(carol); ok {
		t.Fatal("a heartbeat without a certificate taught the directory where carol is")
	}
	// bob's heartbeat, relayed by carol... here by bob himself: its certificate is fetched
	// while the beat waits, then held.
	if err := alice.certs.verify(t.Context(), agentName(1), bob.ID(), bob.ID()); err != nil {
		t.Fatalf("bob's certificate was not fetched: %v", err)
	}
	if err := alice.certs.check(agentName(1), bob.ID()); err != nil {
		t.Fatalf("bob's certificate is not held after the fetch: %v", err)
	}
}

// A node refuses to start in authority mode without its certificate, or with a certificate
// for another agent or peer, and says what to do.
func TestTrustAuthority_NoStartWithoutAValidCertificate(t *testing.T) {
	a, _ := authority.Generate()
	other, _ := authority.Generate()
	for name, c := range map[string]struct {
		cert func(self peer.ID) string
		want string
	}{
		"none":          {func(peer.ID) string { return "" }, "init --join"},
		"another agent": {func(p peer.ID) string { return issue(t, a, "test:x:someone", p) }, "issued to"},
		"another mesh":  {func(p peer.ID) string { return issue(t, other, agentName(0), p) }, "mesh authority"},
	} {
		t.Run(name, func(t *testing.T) {
			net := testsupport.Mocknet(t, 1, testsupport.FirstPort(4999))
			p, _ := peer.IDFromPrivateKey(net.Keys[0])
			_, err := startNode(t, net.Hosts[0], net.Keys[0], agentName(0), WithAuthority(a.ID(), c.cert(p)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func issue(t *testing.T, a *authority.Authority, agent string, p peer.ID) string {
	t.Helper()
	c, err := a.Issue(authority.CertRequest{AgentID: agent, Peer: p})
	if err != nil {
		t.Fatal(err)
	}
	return c.Raw
}

// Joining by invitation: the authority's node issues a one-time invitation; a new node proves
// it holds the secret (for its own peer id and agent id) and gets a certificate that every
// node of the mesh accepts. The invitation works once, only for its agent, and a proof made
// for one peer is worth nothing to another.
func TestTrustAuthority_JoinByInvitation(t *testing.T) {
	m, a := certifiedMesh(t, 2)
	alice := m.nodes[0]
	newcomer := "test:mesh:newcomer"
	if _, _, err := m.nodes[1].Invite(authority.InviteTerms{}); err == nil {
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
	if inv.Authority != a.ID() || len(inv.Addrs) == 0 {
		t.Fatalf("invitation %+v", inv)
	}
	port := 4100
	joiner := func() host.Host {
		port++
		h, _ := m.mn.AddHost(t, port)
		if err := m.mn.LinkAll(); err != nil {
			t.Fatal(err)
		}
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
	m, _ := certifiedMeshWith(t, 2, []Option{WithRateLimit(1, 1)})
	ask := func() error {
		_, err := m.nodes[1].certs.ask(testCtx(t), m.nodes[0].ID(), m.nodes[0].ID())
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
	m, a := certifiedMesh(t, 3, 2)
	alice, bob, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	// mallory answers every request with a certificate that binds bob's id to her own peer
	forged := issue(t, a, agentName(1), mallory.ID())
	mallory.host.SetStreamHandler(CertProtocolID, func(s network.Stream) {
		defer s.Close()
		if _, err := protocol.ReadFrame(s, maxCertRequest); err != nil {
			return
		}
		raw, _ := json.Marshal(certAnswer{Cert: forged})
		_ = protocol.WriteFrame(s, raw)
	})
	if err := alice.certs.fetch(testCtx(t), bob.ID(), mallory.ID(), false); err == nil {
		t.Fatal("a certificate for mallory's peer passed for bob's")
	}
	if err := alice.certs.check(agentName(1), bob.ID()); !errors.Is(err, errNoCert) {
		t.Fatalf("after mallory's failure bob's claim gives %v; want no verdict yet", err)
	}
	if code, perr := dialRaw(t, bob, alice).refusal(event(t, bob.Builder(), agentName(0))); code != "" {
		t.Fatalf("bob was refused after a relayer failed: %s %v", code, perr)
	}
}

// A broadcast whose author's certificate a node does not hold yet is taken once the
// certificate is fetched from the relayer, not ignored: an ignored message is not relayed
// either, so every node behind it would lose it (on a mesh of 300 with 5-minute beats, 93% of
// broadcasts were lost that way).
func TestTrustAuthority_FirstBroadcastOfAnUnknownAuthorIsTaken(t *testing.T) {
	m, _ := certifiedMeshWith(t, 3, []Option{WithGossip(true), WithHeartbeatInterval(300 * time.Second)})
	alice, carol := m.nodes[1], m.nodes[2]
	testsupport.WaitFor(t, 20*time.Second, "a broadcast mesh", func() bool {
		_, a := alice.GossipPeers()
		_, c := carol.GossipPeers()
		return a == 2 && c == 2
	})
	carol.certs.byPeer.Remove(alice.ID()) // as if carol had never heard of alice
	sub, err := carol.Subscribe(pubsubEvents(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	sent, err := alice.Broadcast(testCtx(t), protocol.EventPayload{EventType: "deploy.done", Severity: "info"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case it := <-sub.C():
		if it.Message.Envelope.MessageID != sent.Envelope.MessageID {
			t.Fatalf("carol got %s, want the broadcast %s", it.Message.Envelope.MessageID, sent.Envelope.MessageID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("carol never took alice's broadcast")
	}
	if err := carol.certs.check(alice.AgentID(), alice.ID()); err != nil {
		t.Fatalf("carol holds no certificate for alice after her broadcast: %v", err)
	}
}

// A node asks each bootstrap peer once for the mesh authority, however many lines list it
// (an address per transport), and never itself: a peer that does not answer costs one
// authorityTimeout, not one per line.
func TestTrustAuthority_EachBootstrapPeerIsAskedOnce(t *testing.T) {
	net := testsupport.Mocknet(t, 3, testsupport.FirstPort(4000))
	peers := []string{peerOf(net.Keys[1]), peerOf(net.Keys[2])}
	line := func(i, port int) string {
		return fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", port, peerOf(net.Keys[i]))
	}
	nd, err := startNode(t, net.Hosts[0], net.Keys[0], agentName(0), WithBootstrap(
		line(2, 4101), line(0, 4100), line(1, 4102), line(2, 4103), line(1, 4104)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range nd.authorityPeers() {
		got = append(got, p.String())
	}
	if want := []string{peers[1], peers[0]}; !slices.Equal(got, want) {
		t.Fatalf("peers asked for the authority: %v; want %v, each once in the order of its first line", got, want)
	}
}
