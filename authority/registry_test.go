package authority

import (
	"errors"
	"path/filepath"
	"strings"
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

// TestRegistry_OneAgentIdHasOneHolder: the registry refuses a certificate for an agent id that
// another peer holds (unexpired, unrevoked), with PERMISSION_DENIED naming the holder; the
// holder itself, another agent id, and any peer once the holder's certificate is revoked or
// expired are recorded.
func TestRegistry_OneAgentIdHasOneHolder(t *testing.T) {
	f := newFixture(t)
	now := t0
	r, err := OpenRegistry(filepath.Join(t.TempDir(), "registry.json"), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	holder := f.issue(t)
	if err := r.Record(holder); err != nil {
		t.Fatal(err)
	}
	thief := peerOfKey(t, f.other)
	hijack, err := f.auth.Issue(CertRequest{AgentID: agentID, Peer: thief})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Record(hijack)
	if !errors.Is(err, ErrHeldElsewhere) || !strings.Contains(err.Error(), holder.Peer.String()) || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("a second peer for %s: %v; want ErrHeldElsewhere naming the holder and --replace", agentID, err)
	}
	wantCode(t, err, protocol.CodePermissionDenied)
	if hs := r.Holders(agentID, thief); len(hs) != 1 || hs[0].ID != holder.ID {
		t.Fatalf("Holders: %v; want the holder's certificate", hs)
	}
	if hs := r.Holders(agentID, holder.Peer); len(hs) != 0 {
		t.Fatalf("Holders for the holder itself: %v; want none", hs)
	}
	if err := r.Record(f.issue(t)); err != nil {
		t.Fatalf("the holder's own renewal: %v", err)
	}
	other, err := f.auth.Issue(CertRequest{AgentID: "acme:h:other", Peer: thief})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Record(other); err != nil {
		t.Fatalf("another agent id on the other peer: %v", err)
	}
	if len(r.List()) != 3 {
		t.Fatalf("%d certificates listed after the refusal; want 3", len(r.List()))
	}

	if _, _, err := r.Revoke(f.auth, agentID); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(hijack); err != nil {
		t.Fatalf("after the holder's certificates were revoked: %v", err)
	}
	now = hijack.Expires.Add(time.Second)
	later, err := f.auth.Issue(CertRequest{AgentID: agentID, Peer: f.agent})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Record(later); err != nil {
		t.Fatalf("after the new holder's certificate expired: %v", err)
	}
}

// TestRegistry_RecordReplacingRevokesTheHolder: a replacement records the new peer's
// certificate and revokes every other peer's for the agent id in the next revocation list;
// the holder's other agent ids are untouched. Without a holder it signs no list.
func TestRegistry_RecordReplacingRevokesTheHolder(t *testing.T) {
	f := newFixture(t)
	r, err := OpenRegistry(filepath.Join(t.TempDir(), "registry.json"), func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	old1, old2 := f.issue(t), f.issue(t)
	keep, err := f.auth.Issue(CertRequest{AgentID: "acme:h:other", Peer: f.agent})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Certificate{old1, old2, keep} {
		if err := r.Record(c); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := f.auth.Issue(CertRequest{AgentID: agentID, Peer: peerOfKey(t, f.other)})
	if err != nil {
		t.Fatal(err)
	}
	crl, revoked, err := r.RecordReplacing(f.auth, moved)
	if err != nil || len(revoked) != 2 || crl == "" {
		t.Fatalf("replace: %d revoked, crl %t, %v; want the 2 old certificates and a list", len(revoked), crl != "", err)
	}
	if _, err := f.verifier.ApplyRevocations(crl); err != nil {
		t.Fatal(err)
	}
	if !f.verifier.Revoked(old1.ID) || !f.verifier.Revoked(old2.ID) || f.verifier.Revoked(keep.ID) || f.verifier.Revoked(moved.ID) {
		t.Fatal("the list must revoke exactly the replaced holder's certificates of the agent id")
	}
	if hs := r.Holders(agentID, f.agent); len(hs) != 1 || hs[0].ID != moved.ID {
		t.Fatalf("holder after the replacement: %v; want the new one", hs)
	}
	fresh, err := f.auth.Issue(CertRequest{AgentID: "acme:h:fresh", Peer: f.agent})
	if err != nil {
		t.Fatal(err)
	}
	if crl, revoked, err := r.RecordReplacing(f.auth, fresh); err != nil || crl != "" || len(revoked) != 0 || r.CRLSeq() != 1 {
		t.Fatalf("replacing nobody: crl %q, %v, %v, seq %d; want a plain record", crl, revoked, err, r.CRLSeq())
	}
}
