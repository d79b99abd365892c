package authority

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestRevocations_HigherSeqReplacesLowerIsIgnored(t *testing.T) {
	f := newFixture(t)
	a, b := f.issue(t), f.issue(t)
	crl2, err := f.auth.RevocationList(2, []Revoked{{ID: a.ID, Expires: a.Expires}})
	if err != nil {
		t.Fatal(err)
	}
	crl1, err := f.auth.RevocationList(1, []Revoked{{ID: b.ID, Expires: b.Expires}})
	if err != nil {
		t.Fatal(err)
	}
	crl3, err := f.auth.RevocationList(3, []Revoked{{ID: b.ID, Expires: b.Expires}})
	if err != nil {
		t.Fatal(err)
	}
	if f.verifier.RevocationSeq() != 0 || f.verifier.CurrentRevocations() != "" || f.verifier.Revoked(a.ID) {
		t.Fatal("a new verifier has revocations")
	}
	if changed, err := f.verifier.ApplyRevocations(crl2); !changed || err != nil {
		t.Fatalf("seq 2: %v %v", changed, err)
	}
	for _, old := range []string{crl1, crl2} {
		if changed, err := f.verifier.ApplyRevocations(old); changed || err != nil {
			t.Fatalf("lower or equal seq: changed=%v err=%v", changed, err)
		}
	}
	if !f.verifier.Revoked(a.ID) || f.verifier.Revoked(b.ID) || f.verifier.RevocationSeq() != 2 || f.verifier.CurrentRevocations() != crl2 {
		t.Fatal("an older list changed the revocations")
	}
	if changed, err := f.verifier.ApplyRevocations(crl3); !changed || err != nil {
		t.Fatalf("seq 3: %v %v", changed, err)
	}
	// The higher list replaces, not merges: a is no longer revoked, b is.
	if f.verifier.Revoked(a.ID) || !f.verifier.Revoked(b.ID) || f.verifier.RevocationSeq() != 3 || f.verifier.CurrentRevocations() != crl3 {
		t.Fatal("seq 3 did not replace seq 2")
	}
}

func TestRevocations_ForgedOrBrokenListsAreRefused(t *testing.T) {
	f := newFixture(t)
	c := f.issue(t)
	other, err := New(f.other, WithClock(f.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.RevocationList(99, []Revoked{{ID: c.ID}})
	if err != nil {
		t.Fatal(err)
	}
	good, err := f.auth.RevocationList(5, []Revoked{{ID: c.ID}})
	if err != nil {
		t.Fatal(err)
	}
	mesh := seedKey(t, seedAuthority)
	header := map[string]any{"alg": "EdDSA", "typ": typCRL}
	resign := func(edit func(map[string]any)) string {
		m := claimsOf(t, good)
		edit(m)
		return forge(t, header, m, edSigner(t, mesh))
	}
	tooMany := make([]map[string]any, MaxRevoked+1)
	for i := range tooMany {
		tooMany[i] = map[string]any{"jti": "x"}
	}
	for name, tc := range map[string]struct{ raw, want string }{
		"signed by another key": {forged, "not signed by the mesh authority"},
		"certificate as a list": {c.Raw, `typ is "iacp-cert+jwt"`},
		"alg none":              {forge(t, map[string]any{"alg": "none", "typ": typCRL}, claimsOf(t, good), func([]byte) []byte { return nil }), `alg "none"`},
		"too large":             {good + strings.Repeat("A", MaxCRLBytes), "more than 1048576"},
		"iss of another mesh":   {resign(func(m map[string]any) { m["iss"] = other.ID() }), "is not the mesh id"},
		"issued in the future":  {resign(func(m map[string]any) { m["iat"] = t0.Add(time.Hour).Unix() }), "in the future"},
		"entry without jti":     {resign(func(m map[string]any) { m["revoked"] = []any{map[string]any{"sub": agentID}} }), "no jti"},
		"too many entries":      {resign(func(m map[string]any) { m["revoked"] = tooMany }), "more than 10000"},
		"garbage":               {"garbage", "not a compact JWS"},
	} {
		changed, err := f.verifier.ApplyRevocations(tc.raw)
		if changed || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: changed=%v err=%v, want %q", name, changed, err, tc.want)
			continue
		}
		wantCode(t, err, protocol.CodeIdentityInvalid)
	}
	if f.verifier.RevocationSeq() != 0 || f.verifier.Revoked(c.ID) {
		t.Fatal("a refused list changed the revocations")
	}
}

func TestRevocationList_DropsLongExpiredEntriesAndRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	raw, err := f.auth.RevocationList(1, []Revoked{
		{ID: "expired-long-ago", Expires: t0.Add(-revocationGrace - time.Second)},
		{ID: "expired-recently", Expires: t0.Add(-time.Minute)},
		{ID: "forever"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.ApplyRevocations(raw); err != nil {
		t.Fatal(err)
	}
	if f.verifier.Revoked("expired-long-ago") || !f.verifier.Revoked("expired-recently") || !f.verifier.Revoked("forever") {
		t.Fatal("wrong entries kept")
	}
	if _, err := f.auth.RevocationList(0, nil); err == nil {
		t.Fatal("seq 0 accepted")
	}
	if _, err := f.auth.RevocationList(2, []Revoked{{AgentID: agentID}}); err == nil {
		t.Fatal("an entry without ID accepted")
	}
	many := make([]Revoked, MaxRevoked+1)
	for i := range many {
		many[i].ID = fmt.Sprint(i)
	}
	if _, err := f.auth.RevocationList(2, many); err == nil || !strings.Contains(err.Error(), "MaxRevoked") {
		t.Fatal("more than MaxRevoked accepted")
	}
}

func TestVerifier_ConcurrentUse(t *testing.T) {
	f := newFixture(t)
	c := f.issue(t)
	lists := make([]string, 8)
	for i := range lists {
		var err error
		if lists[i], err = f.auth.RevocationList(uint64(i+1), []Revoked{{ID: fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range lists {
		wg.Go(func() {
			if _, err := f.verifier.ApplyRevocations(lists[i]); err != nil {
				t.Error(err)
			}
			if _, err := f.verifier.Certificate(c.Raw, f.agent, agentID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if f.verifier.RevocationSeq() != uint64(len(lists)) || f.verifier.CurrentRevocations() != lists[len(lists)-1] {
		t.Fatalf("seq %d after applying all lists in any order", f.verifier.RevocationSeq())
	}
}

// TestRevocations_StaleListsAreDroppedBeforeVerifying: once a list is in force, a list whose
// seq is not higher changes nothing and is dropped without its signature being checked (so
// replaying old lists costs the node little); a higher one is still verified and refused
// when forged.
func TestRevocations_StaleListsAreDroppedBeforeVerifying(t *testing.T) {
	f := newFixture(t)
	c := f.issue(t)
	other, err := New(f.other, WithClock(f.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	good, err := f.auth.RevocationList(5, []Revoked{{ID: c.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := f.verifier.ApplyRevocations(good); !changed || err != nil {
		t.Fatalf("seq 5: %v %v", changed, err)
	}
	staleForged, err := other.RevocationList(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := f.verifier.ApplyRevocations(staleForged); changed || err != nil {
		t.Fatalf("a stale list: changed=%v err=%v; want it dropped", changed, err)
	}
	newerForged, err := other.RevocationList(6, nil)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := f.verifier.ApplyRevocations(newerForged); changed || err == nil {
		t.Fatalf("a forged newer list: changed=%v err=%v; want it refused", changed, err)
	}
	if f.verifier.RevocationSeq() != 5 || !f.verifier.Revoked(c.ID) || f.verifier.CurrentRevocations() != good {
		t.Fatal("a stale or forged list changed the revocations")
	}
}

// BenchmarkApplyRevocations_Stale is the cost of a replayed list of MaxRevoked entries.
func BenchmarkApplyRevocations_Stale(b *testing.B) {
	f := newFixture(b)
	many := make([]Revoked, MaxRevoked)
	for i := range many {
		many[i] = Revoked{ID: fmt.Sprintf("certificate-%06d", i), AgentID: agentID}
	}
	old, err := f.auth.RevocationList(1, many)
	if err != nil {
		b.Fatal(err)
	}
	cur, err := f.auth.RevocationList(2, many)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.verifier.ApplyRevocations(cur); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if changed, err := f.verifier.ApplyRevocations(old); changed || err != nil {
			b.Fatal(changed, err)
		}
	}
}
