package trust

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// One agent id, one holder: the authority never certifies an id that another peer holds. An
// invitation naming a held id is refused at invite; a joiner with an invitation that names no
// id is refused the held id before the invitation is used, so it can join under another.
func TestOneHolder_TheAuthorityCertifiesAnIdForOnePeer(t *testing.T) {
	ps := certifiedParts(t, 2)
	alice := ps.t[0]
	alice.cfg.Addrs = func() []ma.Multiaddr {
		addrs, _ := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: ps.id(0), Addrs: ps.net.Hosts[0].Addrs()})
		return addrs
	}
	_, _, err := alice.Invite(authority.InviteTerms{AgentID: agentName(1)})
	expectCode(t, protocol.CodeOf(err), protocol.CodePermissionDenied)
	if !strings.Contains(err.Error(), "--replace") || !strings.Contains(err.Error(), ps.id(1).String()) {
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
	h, _ := ps.addHost(t, 5100)
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

// hijackParts is alice (the authority, part 0), bob (1), carol (2) and a hijacker (3) holding
// bob's agent id with a second certificate the authority issued by hand an hour after bob's:
// the case the authority's registry refuses, forced.
func hijackParts(t *testing.T) *parts {
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
	ps := newParts(t, 4, func(i int, c *Config, _ []host.Host) {
		if i == 0 {
			c.MeshAuthority = a
			return
		}
		issuer := earlier
		if i == 3 {
			c.AgentID, issuer = agentName(1), a
		}
		cert, err := issuer.Issue(authority.CertRequest{AgentID: c.AgentID, Peer: c.Host.ID()})
		if err != nil {
			t.Fatal(err)
		}
		c.Authority, c.Certificate = a.ID(), cert.Raw
	})
	ps.auth = a
	return ps
}

// The DHT keeps the holder's record: a record signed by the second certified peer is refused
// once the holder's certificate was seen, and a store that took it first gives it up to the
// holder's, whatever the seqs; the meeting is a conflict, reported once.
func TestOneHolder_TheDHTKeepsTheHoldersRecord(t *testing.T) {
	ps := hijackParts(t)
	carol := ps.t[2]
	key := discovery.AgentKey(agentName(1))
	now := time.Now()
	sign := func(i int, seq uint64) []byte {
		t.Helper()
		v, err := discovery.SignRecord(discovery.Record{AgentID: agentName(1), PeerID: ps.id(i), Seq: seq, Manifest: protocol.Manifest{AgentID: agentName(1)},
			Expires: now.Add(time.Hour), Cert: ps.t[i].Certificate()}, ps.net.Keys[i])
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	bobs, hijacks := sign(1, uint64(now.UnixNano())), sign(3, uint64(now.UnixNano())+1)

	v := discovery.Validator{Namespace: discovery.AgentNamespace, CertCheck: carol.certs.checkRaw}
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
	testsupport.WaitFor(t, 5*time.Second, "a conflict", func() bool { cs, _, _ := carol.Conflicts(0); return len(cs) > 0 })
	cs, _, _ := carol.Conflicts(0)
	if len(cs) != 1 || cs[0].AgentID != agentName(1) || cs[0].Bound != ps.id(1) || cs[0].Claimant != ps.id(3) || cs[0].Source != SourceCertificate {
		t.Fatalf("conflicts %+v; want one: bob's id bound to bob, claimed by the hijacker, from a certificate", cs)
	}
}
