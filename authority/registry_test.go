package authority

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// TestRegistry_RevokeByAgentSignsTheNextListAndSurvivesReopen: revoking an agent revokes
// every unexpired certificate of it, signs list seq+1 that a verifier applies, and a reopened
// registry continues from that seq; revoking again lists the certificate again.
func TestRegistry_RevokeByAgentSignsTheNextListAndSurvivesReopen(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "registry.json")
	r, err := OpenRegistry(path, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.issue(t), f.issue(t)
	other, err := f.auth.Issue(CertRequest{AgentID: "acme:h:other", Peer: f.agent})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Certificate{a, b, other} {
		if err := r.Record(c); err != nil {
			t.Fatal(err)
		}
	}
	crl, revoked, err := r.Revoke(f.auth, agentID)
	if err != nil || len(revoked) != 2 {
		t.Fatalf("revoke %s: %d revoked, %v; want its 2 certificates", agentID, len(revoked), err)
	}
	if changed, err := f.verifier.ApplyRevocations(crl); !changed || err != nil {
		t.Fatalf("apply: %v %v", changed, err)
	}
	if !f.verifier.Revoked(a.ID) || !f.verifier.Revoked(b.ID) || f.verifier.Revoked(other.ID) || f.verifier.RevocationSeq() != 1 {
		t.Fatal("the list does not revoke exactly the agent's certificates")
	}

	r2, err := OpenRegistry(path, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if r2.CRLSeq() != 1 || len(r2.List()) != 3 {
		t.Fatalf("reopened: seq %d, %d certificates; want 1 and 3", r2.CRLSeq(), len(r2.List()))
	}
	crl2, revoked, err := r2.Revoke(f.auth, other.ID)
	if err != nil || len(revoked) != 1 || revoked[0].ID != other.ID {
		t.Fatalf("revoke by id: %v %v", revoked, err)
	}
	if changed, err := f.verifier.ApplyRevocations(crl2); !changed || err != nil {
		t.Fatalf("apply seq 2: %v %v", changed, err)
	}
	if !f.verifier.Revoked(a.ID) || !f.verifier.Revoked(other.ID) || f.verifier.RevocationSeq() != 2 {
		t.Fatal("list 2 must keep the earlier revocations and add the new one")
	}
	if _, _, err := r2.Revoke(f.auth, "acme:h:nobody"); !errors.Is(err, ErrNothingToRevoke) {
		t.Fatalf("revoke an unknown agent: %v; want ErrNothingToRevoke", err)
	}
	if r2.CRLSeq() != 2 {
		t.Fatalf("a refused revoke moved the seq to %d", r2.CRLSeq())
	}
}

// TestRegistry_ExpiredCertificatesLeave: an expired certificate is not listed, cannot be
// revoked, and leaves the file at the next change.
func TestRegistry_ExpiredCertificatesLeave(t *testing.T) {
	f := newFixture(t)
	now := t0
	r, err := OpenRegistry(filepath.Join(t.TempDir(), "registry.json"), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	c := f.issue(t)
	if err := r.Record(c); err != nil {
		t.Fatal(err)
	}
	now = c.Expires.Add(time.Second)
	if len(r.List()) != 0 {
		t.Fatal("an expired certificate is listed")
	}
	if _, _, err := r.Revoke(f.auth, c.ID); !errors.Is(err, ErrNothingToRevoke) {
		t.Fatalf("revoke an expired certificate: %v", err)
	}
	if _, ok := r.Find(c.ID); ok {
		t.Fatal("Find returned an expired certificate")
	}
}

// TestRegistry_BoundsTheCertificatesOfOneHolder: a renewed certificate stays valid, so its
// holder could have it renewed in a loop; the registry records at most MaxPerHolder unexpired,
// unrevoked certificates of one agent on one peer, and refuses the next with
// PERMISSION_DENIED. Other holders are untouched, and revoking frees the room.
func TestRegistry_BoundsTheCertificatesOfOneHolder(t *testing.T) {
	f := newFixture(t)
	r, err := OpenRegistry(filepath.Join(t.TempDir(), "registry.json"), func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxPerHolder {
		if err := r.Record(f.issue(t)); err != nil {
			t.Fatalf("certificate %d: %v", i+1, err)
		}
	}
	err = r.Record(f.issue(t))
	if !errors.Is(err, ErrHolderFull) {
		t.Fatalf("certificate %d of one holder: %v; want ErrHolderFull", MaxPerHolder+1, err)
	}
	wantCode(t, err, protocol.CodePermissionDenied)
	other, err := f.auth.Issue(CertRequest{AgentID: "acme:h:other", Peer: f.agent})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Record(other); err != nil {
		t.Fatalf("another agent on the same peer: %v", err)
	}
	if _, _, err := r.Revoke(f.auth, agentID); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(f.issue(t)); err != nil {
		t.Fatalf("after the holder's certificates were revoked: %v", err)
	}
}
