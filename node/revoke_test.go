package node

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// A revoked agent is refused everywhere within one gossip round: the authority's node signs
// the next revocation list and broadcasts it; every node applies it at once (the periodic
// sync is a minute away, so gossip carried it), keeps it on disk, and from then on refuses
// the agent's messages with IDENTITY_INVALID naming the revocation, and its heartbeats.
func TestTrustAuthority_RevokedIsRefusedEverywhereWithinAGossipRound(t *testing.T) {
	m, _ := certifiedMeshWith(t, 4, []Option{WithGossip(true), WithHeartbeatInterval(time.Second)})
	auth, bob := m.nodes[0], m.nodes[2]
	for i, nd := range m.nodes {
		if i == 0 {
			continue
		}
		// the broadcast is taken from an author whose certificate the node verified: its
		// heartbeats bring it within a round
		testsupport.WaitFor(t, 15*time.Second, fmt.Sprintf("node %d holds the authority node's certificate", i), func() bool {
			return nd.certs.check(agentName(0), auth.ID()) == nil
		})
	}
	for _, i := range []int{1, 3} {
		if code, _ := dialRaw(t, bob, m.nodes[i]).refusal(event(t, bob.Builder(), agentName(i))); code != "" {
			t.Fatalf("before the revocation node %d refused bob: %s", i, code)
		}
		testsupport.WaitFor(t, 15*time.Second, fmt.Sprintf("node %d lists bob alive", i), func() bool {
			a, ok := m.nodes[i].Agent(agentName(2))
			return ok && a.State == StateAlive
		})
	}
	if _, err := m.nodes[1].Revoke(testCtx(t), agentName(2), RevokeOptions{}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("a node that is not the authority revoked: %v", err)
	}
	revoked, err := auth.Revoke(testCtx(t), agentName(2), RevokeOptions{})
	if err != nil || len(revoked) != 1 || revoked[0].Peer != bob.ID() {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	id := revoked[0].ID
	for i, nd := range m.nodes {
		testsupport.WaitFor(t, 10*time.Second, fmt.Sprintf("node %d applied the revocation", i), func() bool { return nd.certs.v.Revoked(id) })
		if nd.RevocationSeq() == 0 || nd.RevocationSeq() != auth.RevocationSeq() {
			t.Fatalf("node %d holds revocation list %d, the authority %d", i, nd.RevocationSeq(), auth.RevocationSeq())
		}
	}
	// bob leaves the liveness tables with the list, not after his silence (a beat validated
	// just before the list applied may put him back for a moment: the wait allows for it)
	for _, i := range []int{1, 3} {
		testsupport.WaitFor(t, 2*time.Second, fmt.Sprintf("node %d forgets bob", i), func() bool {
			_, ok := m.nodes[i].Agent(agentName(2))
			return !ok
		})
	}
	for _, i := range []int{0, 1, 3} {
		code, perr := dialRaw(t, bob, m.nodes[i]).refusal(event(t, bob.Builder(), agentName(i)))
		expectCode(t, code, protocol.CodeIdentityInvalid)
		if !strings.Contains(perr.Message, "revoked") {
			t.Fatalf("node %d's refusal does not name the revocation: %q", i, perr.Message)
		}
		if m.nodes[i].certs.verify(t.Context(), agentName(2), bob.ID(), bob.ID()) == nil {
			t.Fatalf("node %d still takes bob's heartbeats", i)
		}
		saved, err := os.ReadFile(filepath.Join(m.nodes[i].cfg.DataDir, RevocationsFile))
		if err != nil || string(saved) != m.nodes[i].certs.v.CurrentRevocations() {
			t.Fatalf("node %d did not keep the list: %v", i, err)
		}
	}
	// the others are untouched
	if code, _ := dialRaw(t, m.nodes[3], m.nodes[1]).refusal(event(t, m.nodes[3].Builder(), agentName(1))); code != "" {
		t.Fatalf("an agent that was not revoked was refused: %s", code)
	}
}

// A node that missed the broadcast (here: no gossip at all) asks a connected peer for a newer
// list at each sync, and catches up.
func TestTrustAuthority_AMissedRevocationListIsFetchedFromAPeer(t *testing.T) {
	fastSync := func(c *Config) error { c.revocationSync = 50 * time.Millisecond; return nil }
	m, _ := certifiedMeshWith(t, 3, []Option{fastSync})
	revoked, err := m.nodes[0].Revoke(testCtx(t), agentName(1), RevokeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "node 2 fetched the list", func() bool { return m.nodes[2].certs.v.Revoked(revoked[0].ID) })
	code, perr := dialRaw(t, m.nodes[1], m.nodes[2]).refusal(event(t, m.nodes[1].Builder(), agentName(2)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if !strings.Contains(perr.Message, "revoked") {
		t.Fatalf("refusal %q does not name the revocation", perr.Message)
	}
}

// A certificate is renewed when a third of its lifetime is left: the node asks the
// authority's node, which issues the successor (and records it); the node saves it and shows
// it from then on. A certificate with more than half its life left is not renewed.
func TestTrustAuthority_ACertificateIsRenewedBeforeItExpires(t *testing.T) {
	m, _ := certifiedMesh(t, 2)
	auth := m.nodes[0]
	// an authority of the same key whose clock is 25 days back issued the newcomer's
	// certificate: 5 days of its 30 are left
	keyFile := filepath.Join(t.TempDir(), AuthorityKeyFile)
	if err := auth.cfg.MeshAuthority.Save(keyFile); err != nil {
		t.Fatal(err)
	}
	past, err := authority.Load(keyFile, authority.WithClock(func() time.Time { return time.Now().Add(-25 * 24 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	h, sk := m.mn.AddHost(t, 4090)
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	old, err := past.Issue(authority.CertRequest{AgentID: "test:mesh:old", Peer: h.ID()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	nd, err := New(WithHost(h, sk), WithAgent("test:mesh:old", protocolManifest()), WithDataDir(dir),
		WithLogger(slog.New(slog.DiscardHandler)), WithDiscovery(false), WithGossip(false),
		WithAuthority(auth.cfg.Authority, old.Raw), WithAuthorityNode(auth.ID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	nd.AddPeer(agentName(0), peer.AddrInfo{ID: auth.ID(), Addrs: auth.host.Addrs()})
	testsupport.WaitFor(t, 15*time.Second, "the certificate renewed", func() bool { return nd.certs.own.Load().ID != old.ID })
	renewed := nd.certs.own.Load()
	if !renewed.Expires.After(time.Now().Add(29*24*time.Hour)) || renewed.AgentID != old.AgentID || renewed.Peer != h.ID() {
		t.Fatalf("renewed certificate: %s on %s until %s", renewed.AgentID, renewed.Peer, renewed.Expires)
	}
	saved, _ := os.ReadFile(filepath.Join(dir, CertFile))
	if strings.TrimSpace(string(saved)) != renewed.Raw {
		t.Fatal("the renewed certificate was not saved")
	}
	if _, ok := auth.registry.Find(renewed.ID); !ok {
		t.Fatal("the authority did not record the certificate it renewed")
	}
	// the old certificate stays valid once renewed, but showing it again and again does not
	// grow the registry: it records at most MaxPerHolder certificates of one holder
	for i := 2; ; i++ {
		_, err := nd.askAuthority(testCtx(t), authorityRequest{Op: opRenew, Cert: old.Raw})
		if err == nil {
			if i > authority.MaxPerHolder {
				t.Fatalf("renewal %d of one certificate was granted; at most %d are", i, authority.MaxPerHolder)
			}
			continue
		}
		if protocol.CodeOf(err) != protocol.CodePermissionDenied || i != authority.MaxPerHolder+1 {
			t.Fatalf("renewal %d of one certificate: %v; want PERMISSION_DENIED after %d", i, err, authority.MaxPerHolder)
		}
		break
	}
	// a fresh certificate is not renewed
	fresh := m.nodes[1]
	_, err = fresh.askAuthority(testCtx(t), authorityRequest{Op: opRenew, Cert: fresh.certs.own.Load().Raw})
	if protocol.CodeOf(err) != protocol.CodePermissionDenied || !strings.Contains(err.Error(), "last half") {
		t.Fatalf("renewing a fresh certificate: %v; want PERMISSION_DENIED", err)
	}
	// and nobody renews a certificate that is not theirs
	_, err = fresh.askAuthority(testCtx(t), authorityRequest{Op: opRenew, Cert: renewed.Raw})
	if protocol.CodeOf(err) != protocol.CodeIdentityInvalid {
		t.Fatalf("renewing another peer's certificate: %v; want IDENTITY_INVALID", err)
	}
}
