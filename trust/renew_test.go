package trust

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// A certificate is renewed when a third of its lifetime is left: the node asks the
// authority's node, which issues the successor (and records it); the node saves it and shows
// it from then on. A certificate with more than half its life left is not renewed.
func TestTrustAuthority_ACertificateIsRenewedBeforeItExpires(t *testing.T) {
	ps := certifiedParts(t, 2)
	auth := ps.t[0]
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
	h, _ := ps.addHost(t, 5090)
	old, err := past.Issue(authority.CertRequest{AgentID: "test:mesh:old", Peer: h.ID()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	nd, err := New(Config{Host: h, AgentID: "test:mesh:old", DataDir: dir, Log: slog.New(slog.DiscardHandler),
		Authority: auth.cfg.Authority, Certificate: old.Raw, AuthorityNode: ps.id(0).String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	testsupport.WaitFor(t, 15*time.Second, "the certificate renewed", func() bool { return nd.certs.own.Load().ID != old.ID })
	renewed := nd.certs.own.Load()
	if !renewed.Expires.After(time.Now().Add(29*24*time.Hour)) || renewed.AgentID != old.AgentID || renewed.Peer != h.ID() {
		t.Fatalf("renewed certificate: %s on %s until %s", renewed.AgentID, renewed.Peer, renewed.Expires)
	}
	saved, _ := os.ReadFile(filepath.Join(dir, CertFile))
	if strings.TrimSpace(string(saved)) != renewed.Raw {
		t.Fatal("the renewed certificate was not saved")
	}
	if _, ok := auth.reg.Find(renewed.ID); !ok {
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
	fresh := ps.t[1]
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
