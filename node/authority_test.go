package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/trust"
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
				return []Option{WithTrust(trust.Open)}
			}
		}
		if i == 0 {
			return []Option{WithMeshAuthority(a)}
		}
		// joined by invitation, as any member does
		token, _, err := m.nodes[0].Trust().Invite(authority.InviteTerms{AgentID: agentName(i), Grants: grants[i]})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := authority.DecodeInvite(token)
		if err != nil {
			t.Fatal(err)
		}
		c, err := trust.Join(testCtx(t), m.mn.Hosts[i], inv, agentName(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		return []Option{WithAuthority(a.ID(), c.Raw), WithAuthorityNode(m.nodes[0].ID())}
	})
	return m, a
}

// One signed message claiming bob, sent before bob ever spoke, pinned bob
// to the attacker. Under a mesh authority the claim is refused (mallory holds no certificate
// for bob), nothing is bound, the real bob is never refused, and alice's messages for bob
// reach bob.
func TestTrustAuthority_AClaimWithoutACertificateIsRefused(t *testing.T) {
	m, _ := certifiedMesh(t, 3, 2)
	alice, bob, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	if alice.Trust().Mode() != trust.Authority || mallory.Trust().Mode() != trust.Open {
		t.Fatalf("modes %s and %s", alice.Trust().Mode(), mallory.Trust().Mode())
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
	if _, ok := alice.peers.directory.Peek(agentName(1)); ok {
		if p, _ := alice.peers.directory.Peek(agentName(1)); p == mallory.ID() {
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
	if _, err := authority.NewVerifier(a.PublicKey()).Certificate(bob.trust.Certificate(), carol.ID(), agentName(1)); err == nil {
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
	carol.Trust().Forget("", alice.ID()) // as if carol had never heard of alice
	sub, err := carol.Subscribe(broadcastEvents(), 16)
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
	if _, err := carol.trust.Heard(alice.AgentID(), alice.ID()); err != nil {
		t.Fatalf("carol holds no certificate for alice after her broadcast: %v", err)
	}
}

// A node hands trust each bootstrap peer once, however many lines list it (an address per
// transport), in the order of its first line, and never itself: the authority's node is asked
// among them, and a peer that does not answer costs one authority timeout, not one per line.
func TestTrustAuthority_EachBootstrapPeerIsHandedToTrustOnce(t *testing.T) {
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
	for _, p := range nd.peers.bootstrapIDs() {
		got = append(got, p.String())
	}
	if want := []string{peers[1], peers[0]}; !slices.Equal(got, want) {
		t.Fatalf("bootstrap peers handed to trust: %v; want %v, each once in the order of its first line", got, want)
	}
}
