package node

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// One agent id, one holder: the authority never certifies an id that another peer holds. An
// invitation naming a held id is refused at invite; a joiner with an invitation that names no
// id is refused the held id before the invitation is used, so it can join under another.
func TestOneHolder_TheAuthorityCertifiesAnIdForOnePeer(t *testing.T) {
	m, _ := certifiedMesh(t, 2)
	alice := m.nodes[0]
	_, _, err := alice.Invite(authority.InviteTerms{AgentID: agentName(1)})
	expectCode(t, protocol.CodeOf(err), protocol.CodePermissionDenied)
	if !strings.Contains(err.Error(), "--replace") || !strings.Contains(err.Error(), m.nodes[1].ID().String()) {
		t.Fatalf("inviting for a held id: %v; want the holder named and --replace offered", err)
	}
	token, _, err := alice.Invite(authority.InviteTerms{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := authority.DecodeInvite(token)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := m.mn.AddHost(t, 4100)
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	for _, held := range []string{agentName(0), agentName(1)} {
		_, err := Join(testCtx(t), h, inv, held, nil)
		if !errors.Is(err, authority.ErrHeldElsewhere) && !strings.Contains(err.Error(), "held by another peer") {
			t.Fatalf("joining as %s, which another peer holds: %v; want it refused", held, err)
		}
	}
	cert, err := Join(testCtx(t), h, inv, "test:mesh:newcomer", nil)
	if err != nil {
		t.Fatalf("the refusals used up the invitation: %v", err)
	}
	holders := map[string][]peer.ID{}
	cs, err := alice.Certificates()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		holders[c.AgentID] = append(holders[c.AgentID], c.Peer)
	}
	if len(holders) != 3 || len(holders[agentName(0)]) != 1 || len(holders[agentName(1)]) != 1 || holders[cert.AgentID][0] != h.ID() {
		t.Fatalf("the registry holds %v; want one holder per agent id", holders)
	}
}

// An operator moves an agent id to a new peer on purpose: an invitation with replace gives the
// joiner the id and revokes the holder's certificates in a list every node applies.
func TestOneHolder_ReplaceMovesTheIdAndRevokesTheHolder(t *testing.T) {
	m, _ := certifiedMesh(t, 3)
	alice, bob, carol := m.nodes[0], m.nodes[1], m.nodes[2]
	if err := carol.Send(testCtx(t), event(t, carol.Builder(), agentName(1))); err != nil {
		t.Fatalf("carol to bob before the move: %v", err)
	}
	token, _, err := alice.Invite(authority.InviteTerms{AgentID: agentName(1), Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := authority.DecodeInvite(token)
	h, sk := m.mn.AddHost(t, 4100)
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	cert, err := Join(testCtx(t), h, inv, agentName(1), nil)
	if err != nil {
		t.Fatalf("joining with replace: %v", err)
	}
	if alice.RevocationSeq() != 1 {
		t.Fatalf("the authority holds revocation list %d; want 1, revoking the old holder", alice.RevocationSeq())
	}
	if err := alice.certs.verify(testCtx(t), agentName(1), bob.ID(), ""); protocol.CodeOf(err) != protocol.CodeIdentityInvalid || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("the old holder after the move: %v; want it revoked", err)
	}
	if _, err := alice.certs.v.Certificate(cert.Raw, h.ID(), agentName(1)); err != nil {
		t.Fatalf("the new holder's certificate: %v", err)
	}
	// Peers learn the list from the certificate exchange (this mesh has no gossip).
	ans, err := carol.certs.ask(testCtx(t), alice.ID(), alice.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := carol.certs.applyRevocations(ans.CRL); err != nil {
		t.Fatal(err)
	}
	// carol's directory still names the old holder: her next send looks the agent up again
	// rather than failing on the revoked peer, and reaches the agent where it moved.
	if err := carol.certs.verify(testCtx(t), agentName(1), bob.ID(), ""); protocol.CodeOf(err) != protocol.CodeIdentityInvalid {
		t.Fatalf("carol on the old holder after the move: %v; want IDENTITY_INVALID", err)
	}
	if p, _ := carol.directory.Peek(agentName(1)); p != bob.ID() {
		t.Fatalf("carol's directory names %s for the agent; the test wants the old holder there", p)
	}
	moved, err := startNode(t, h, sk, agentName(1), WithAuthority(alice.cfg.Authority, cert.Raw), WithAuthorityNode(alice.ID()), WithInbox(true))
	if err != nil {
		t.Fatal(err)
	}
	carol.AddResolver(fixedResolver{agentName(1): {ID: h.ID(), Addrs: h.Addrs()}})
	if err := carol.Send(testCtx(t), event(t, carol.Builder(), agentName(1))); err != nil {
		t.Fatalf("carol to the agent after it moved: %v", err)
	}
	testsupport.WaitFor(t, 5*time.Second, "the message at the agent's new peer", func() bool { return moved.Inbox().Len() == 1 })
}

// fixedResolver resolves the agent ids it lists.
type fixedResolver map[string]peer.AddrInfo

func (r fixedResolver) ResolveAgent(_ context.Context, agentID string) (peer.AddrInfo, error) {
	if ai, ok := r[agentID]; ok {
		return ai, nil
	}
	return peer.AddrInfo{}, protocol.Errorf(protocol.CodeAgentNotFound, "no record of %s", agentID)
}

// hijackMesh is a mesh of alice (the authority, node 0), bob (node 1), carol and dave (2 and
// 3), and a hijacker (node 4) serving bob's agent id with a second certificate the authority
// issued by hand an hour after bob's: the case the authority's registry refuses, forced.
func hijackMesh(t *testing.T) (*mesh, *Node) {
	t.Helper()
	a, err := authority.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "authority.key")
	if err := a.Save(keyFile); err != nil {
		t.Fatal(err)
	}
	earlier, err := authority.Load(keyFile, authority.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	m := newMesh(t, 5, nil, func(i int, m *mesh) []Option {
		if i == 0 {
			return []Option{WithMeshAuthority(a)}
		}
		id, _ := peer.IDFromPrivateKey(m.keys[i])
		agent, issuer := agentName(i), earlier
		if i == 4 {
			agent, issuer = agentName(1), a
		}
		c, err := issuer.Issue(authority.CertRequest{AgentID: agent, Peer: id})
		if err != nil {
			t.Fatal(err)
		}
		return []Option{WithAgent(agent, protocolManifest()), WithAuthority(a.ID(), c.Raw), WithAuthorityNode(m.nodes[0].ID()), WithInbox(true)}
	})
	return m, m.nodes[4]
}

// A second certificate for a held id, made by hand: every node that sees both holders reports a
// conflict, keeps the first holder whichever it heard first, and refuses the second.
func TestOneHolder_ASecondCertifiedPeerIsAConflictAndTheFirstHolderKeepsTheId(t *testing.T) {
	m, hijacker := hijackMesh(t)
	bob, carol, dave := m.nodes[1], m.nodes[2], m.nodes[3]

	// carol heard bob first: the hijacker speaking as bob is refused and reported.
	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(2))); err != nil {
		t.Fatal(err)
	}
	code, perr := dialRaw(t, hijacker, carol).refusal(event(t, hijacker.Builder(), agentName(2)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if !strings.Contains(perr.Message, "held by peer "+bob.ID().String()) {
		t.Fatalf("the refusal %q does not name the holder", perr.Message)
	}
	wantConflict(t, carol, bob, hijacker)

	// dave heard the hijacker first: bob's certificate, which precedes, takes the id back, and
	// from then on dave refuses the hijacker and delivers bob's mail to bob.
	if err := hijacker.Send(testCtx(t), event(t, hijacker.Builder(), agentName(3))); err != nil {
		t.Fatalf("the hijacker's first message to dave: %v", err)
	}
	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(3))); err != nil {
		t.Fatalf("bob to dave after the hijacker: %v", err)
	}
	wantConflict(t, dave, bob, hijacker)
	code, _ = dialRaw(t, hijacker, dave).refusal(event(t, hijacker.Builder(), agentName(3)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	before, stolen := bob.Inbox().Len(), hijacker.Inbox().Len()
	if err := dave.Send(testCtx(t), event(t, dave.Builder(), agentName(1))); err != nil {
		t.Fatalf("dave to bob: %v", err)
	}
	testsupport.WaitFor(t, 5*time.Second, "dave's message in bob's inbox", func() bool { return bob.Inbox().Len() == before+1 })
	if n := hijacker.Inbox().Len(); n != stolen {
		t.Fatalf("dave's message for bob reached the hijacker (its inbox went from %d to %d)", stolen, n)
	}
}

// wantConflict waits until n reports a certificate conflict over bob's id between holder and
// claimant, and checks there is exactly one for the pair however many messages met it.
func wantConflict(t *testing.T, n *Node, holder, claimant *Node) {
	t.Helper()
	testsupport.WaitFor(t, 5*time.Second, "a certificate conflict", func() bool {
		cs, _, _ := n.TrustConflicts(0)
		return len(cs) > 0
	})
	cs, _, _ := n.TrustConflicts(0)
	if len(cs) != 1 || cs[0].AgentID != agentName(1) || cs[0].Bound != holder.ID() || cs[0].Claimant != claimant.ID() || cs[0].Source != claimCertificate {
		t.Fatalf("conflicts %+v; want one: %s bound to %s, claimed by %s, from a certificate", cs, agentName(1), holder.ID(), claimant.ID())
	}
}

// The DHT keeps the holder's record: a record signed by the second certified peer is refused
// once the holder's certificate was seen, and a store that took it first gives it up to the
// holder's, whatever the seqs.
func TestOneHolder_TheDHTKeepsTheHoldersRecord(t *testing.T) {
	m, hijacker := hijackMesh(t)
	bob, carol := m.nodes[1], m.nodes[2]
	key := discovery.AgentKey(agentName(1))
	now := time.Now()
	sign := func(n *Node, seq uint64) []byte {
		t.Helper()
		v, err := discovery.SignRecord(discovery.Record{AgentID: agentName(1), PeerID: n.ID(), Seq: seq, Manifest: protocol.Manifest{AgentID: agentName(1)},
			Expires: now.Add(time.Hour), Cert: n.certs.own.Load().Raw}, m.keys[indexOf(m, n)])
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	bobs, hijacks := sign(bob, uint64(now.UnixNano())), sign(hijacker, uint64(now.UnixNano())+1)

	v := discovery.Validator{Namespace: discovery.AgentNamespace, CertCheck: carol.certs.checkRaw}
	var _ record.Validator = v
	if err := v.Validate(key, hijacks); err != nil {
		t.Fatalf("the hijacker's record before bob's was seen: %v", err)
	}
	if i, err := v.Select(key, [][]byte{bobs, hijacks}); err != nil || i != 0 {
		t.Fatalf("select between bob's record and the hijacker's newer one: %d, %v; want bob's", i, err)
	}
	if err := v.Validate(key, hijacks); err == nil {
		t.Fatal("the hijacker's record still validates once bob's certificate was seen")
	}
	if i, err := v.Select(key, [][]byte{hijacks, bobs}); err != nil || i != 1 {
		t.Fatalf("select, the other order: %d, %v; want bob's", i, err)
	}
	wantConflict(t, carol, bob, hijacker)
}

func indexOf(m *mesh, n *Node) int {
	for i, x := range m.nodes {
		if x == n {
			return i
		}
	}
	return -1
}
