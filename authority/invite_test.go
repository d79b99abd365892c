package authority

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// testInvite returns an invitation of the fixture's authority.
func testInvite(f *fixture) Invite {
	return Invite{
		Addrs:     []string{"/ip4/192.0.2.1/tcp/4001/p2p/" + f.auth.ID()},
		Authority: f.auth.ID(), AuthorityKey: f.auth.PublicKey(),
		Secret:  []byte("0123456789abcdef0123456789abcdef"),
		AgentID: agentID, Expires: t0.Add(DefaultInviteTTL),
	}
}

func TestInvite_EncodeDecodeRoundTrip(t *testing.T) {
	f := newFixture(t)
	inv := testInvite(f)
	s := inv.Encode()
	if !strings.HasPrefix(s, InvitePrefix) || len(s) > 400 {
		t.Fatalf("encoded %d characters: %s", len(s), s)
	}
	got, err := DecodeInvite("  " + s + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, inv) {
		t.Fatalf("decoded %+v\nwant    %+v", got, inv)
	}
	// Authority is derived from the key when empty.
	inv.Authority = ""
	if got, err := DecodeInvite(inv.Encode()); err != nil || got.Authority != f.auth.ID() {
		t.Fatalf("%v %v", got.Authority, err)
	}
}

func TestDecodeInvite_RefusesGarbage(t *testing.T) {
	f := newFixture(t)
	enc := func(edit func(m map[string]any)) string {
		var m map[string]any
		b, _ := b64.DecodeString(strings.TrimPrefix(testInvite(f).Encode(), InvitePrefix))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		return InvitePrefix + b64.EncodeToString(mustJSON(t, m))
	}
	good := testInvite(f).Encode()
	secp, _, _ := crypto.GenerateKeyPair(crypto.Secp256k1, 0)
	secpID := peerOfKey(t, secp).String()
	for name, tc := range map[string]struct{ s, want string }{
		"empty":               {"", "does not start with"},
		"other version":       {"iacp-invite-v2." + strings.TrimPrefix(good, InvitePrefix), "does not start with"},
		"cut when pasted":     {good[:len(good)-1], "not base64url"},
		"too long":            {good + strings.Repeat("A", MaxInviteBytes), "more than 8192"},
		"not JSON":            {InvitePrefix + b64.EncodeToString([]byte("hello")), "not the JSON"},
		"trailing data":       {InvitePrefix + b64.EncodeToString([]byte(`{"addrs":[]} {}`)), "data after"},
		"unknown field":       {enc(func(m map[string]any) { m["admin"] = true }), "unknown field"},
		"authority not an id": {enc(func(m map[string]any) { m["authority"] = "nope" }), "not a peer id"},
		"authority secp256k1": {enc(func(m map[string]any) { m["authority"] = secpID }), "not an Ed25519 peer id"},
		"short secret":        {enc(func(m map[string]any) { m["secret"] = "AAAA" }), "secret is not 32 bytes"},
		"no addresses":        {enc(func(m map[string]any) { m["addrs"] = []string{} }), "0 bootstrap addresses"},
		"address without p2p": {enc(func(m map[string]any) { m["addrs"] = []string{"/ip4/192.0.2.1/tcp/4001"} }), "not a multiaddr"},
		"bad agent":           {enc(func(m map[string]any) { m["agent"] = "x" }), "agent:"},
		"no expiry":           {enc(func(m map[string]any) { delete(m, "exp") }), "no expiry"},
	} {
		_, err := DecodeInvite(tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
			continue
		}
		wantCode(t, err, protocol.CodePayloadInvalid)
	}
}

// openBook opens a book in dir with the test clock.
func openBook(t *testing.T, path string, c *clock) *InviteBook {
	t.Helper()
	b, err := OpenInviteBook(path, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInviteBook_RedeemOnceAndItSurvivesReopen(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "authority", "invites.json")
	c := &clock{t0}
	book := openBook(t, path, c)
	secret, expires, err := book.Create(InviteTerms{Grants: []string{"read:datasets"}})
	if err != nil || len(secret) != InviteSecretSize || !expires.Equal(t0.Add(DefaultInviteTTL)) {
		t.Fatalf("Create: %v %d %v", err, len(secret), expires)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("book file: %v %v", err, st)
	}
	// The file holds the secret (see the package doc) and its id.
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), InviteID(secret)) {
		t.Fatal("the file does not name the invitation")
	}
	id, proof := InviteID(secret), Proof(secret, f.agent, agentID)
	if red, err := book.RedeemProof(id, proof, f.agent, agentID); err != nil || !reflect.DeepEqual(red, Redemption{Grants: []string{"read:datasets"}}) {
		t.Fatalf("redeem: %+v, %v; want the invitation's [read:datasets], for the first time", red, err)
	}
	// Another peer, or the same peer for another agent, finds it used, whatever it proves.
	other := peerOfKey(t, f.other)
	if err := redeemErr(book, id, Proof(secret, other, agentID), other, agentID); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("redemption by another peer: %v", err)
	}
	wantCode(t, redeemErr(book, id, Proof(secret, other, agentID), other, agentID), protocol.CodePermissionDenied)
	if err := redeemErr(book, id, Proof(secret, f.agent, "test:agent:other"), f.agent, "test:agent:other"); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("redemption for another agent: %v", err)
	}
	if err := book.Redeem(secret, agentID); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("Redeem, which names no peer: %v", err)
	}
	// The peer that redeemed it, for the same agent, asks again: its answer was lost. Before
	// the certificate is issued it gets the grants again; after, the certificate itself.
	if red, err := book.RedeemProof(id, proof, f.agent, agentID); err != nil || !red.Again || red.Cert != "" || len(red.Grants) != 1 {
		t.Fatalf("asked again before the certificate was issued: %+v, %v", red, err)
	}
	book.Issued(id, "the certificate")
	if red, err := book.RedeemProof(id, proof, f.agent, agentID); err != nil || !red.Again || red.Cert != "the certificate" {
		t.Fatalf("asked again: %+v, %v; want the certificate issued the first time", red, err)
	}
	// Reopened, as after a restart: still used; asked again by its peer, it is granted again
	// (the book keeps certificates in memory only, so a new one is issued).
	reopened := openBook(t, path, c)
	if err := redeemErr(reopened, id, Proof(secret, other, agentID), other, agentID); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("redemption by another peer after reopening: %v", err)
	}
	if err := reopened.Redeem(secret, agentID); !errors.Is(err, ErrInviteUsed) {
		t.Fatalf("Redeem after reopening: %v", err)
	}
	if red, err := reopened.RedeemProof(id, proof, f.agent, agentID); err != nil || !red.Again || red.Cert != "" {
		t.Fatalf("asked again after reopening: %+v, %v", red, err)
	}
	list := reopened.List()
	if len(list) != 1 || !list[0].Used || list[0].UsedBy != f.agent || !strings.HasPrefix(id, list[0].IDPrefix) || list[0].AgentID != "" {
		t.Fatalf("List %+v", list)
	}
}

func TestInviteBook_Refusals(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "invites.json")
	c := &clock{t0}
	book := openBook(t, path, c)
	bound, _, err := book.Create(InviteTerms{AgentID: agentID, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	short, _, err := book.Create(InviteTerms{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	otherPeer := peerOfKey(t, f.other)
	unknown := []byte("ffffffffffffffffffffffffffffffff")

	// A proof made for this peer, presented for another (a secret observed on the wire).
	err = redeemErr(book, InviteID(bound), Proof(bound, f.agent, agentID), otherPeer, agentID)
	if !errors.Is(err, ErrInviteProof) {
		t.Fatalf("proof for another peer: %v", err)
	}
	wantCode(t, err, protocol.CodeIdentityInvalid)
	if err := redeemErr(book, InviteID(bound), Proof(bound, f.agent, agentID), f.agent, "acme:host1:other"); !errors.Is(err, ErrInviteProof) {
		t.Fatalf("proof for another agent: %v", err)
	}
	if err := redeemErr(book, InviteID(unknown), Proof(unknown, f.agent, agentID), f.agent, agentID); !errors.Is(err, ErrInviteUnknown) {
		t.Fatalf("unknown invitation: %v", err)
	}
	if err := book.Redeem(unknown, agentID); !errors.Is(err, ErrInviteUnknown) {
		t.Fatalf("unknown secret: %v", err)
	}
	// Bound to agentID: another agent is refused even with a valid proof.
	other := "acme:host1:other"
	err = redeemErr(book, InviteID(bound), Proof(bound, f.agent, other), f.agent, other)
	if !errors.Is(err, ErrInviteAgent) {
		t.Fatalf("bound invitation, other agent: %v", err)
	}
	wantCode(t, err, protocol.CodePermissionDenied)
	// Expired (the clock moves past it), then pruned at the next write.
	c.t = t0.Add(time.Minute)
	if err := book.Redeem(short, agentID); !errors.Is(err, ErrInviteExpired) {
		t.Fatalf("expired: %v", err)
	}
	if err := book.Redeem(bound, agentID); err != nil {
		t.Fatal(err)
	}
	if err := openBook(t, path, c).Redeem(short, agentID); !errors.Is(err, ErrInviteUnknown) {
		t.Fatalf("expired invitation not pruned: %v", err)
	}
	// Bad arguments.
	if _, _, err := book.Create(InviteTerms{AgentID: "bad"}); err == nil {
		t.Fatal("Create with a bad agent id")
	}
	if _, _, err := book.Create(InviteTerms{TTL: MaxInviteTTL + time.Hour}); err == nil {
		t.Fatal("Create with a too long ttl")
	}
	if err := book.Redeem(bound, ""); err == nil {
		t.Fatal("Redeem without an agent id")
	}
}

func TestOpenInviteBook_RefusesPublicOrDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	path := filepath.Join(dir, "invites.json")
	book := openBook(t, path, c)
	if _, _, err := book.Create(InviteTerms{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenInviteBook(path, c.now); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("public book: %v", err)
	}
	for name, content := range map[string]string{
		"not JSON":      "{",
		"version 2":     `{"version":2,"invites":[]}`,
		"id mismatch":   `{"version":1,"invites":[{"id":"x","secret":"` + b64.EncodeToString(make([]byte, 32)) + `"}]}`,
		"short secret":  `{"version":1,"invites":[{"id":"x","secret":"AAAA"}]}`,
		"duplicate ids": `{"version":1,"invites":[{"id":"` + InviteID(make([]byte, 32)) + `","secret":"` + b64.EncodeToString(make([]byte, 32)) + `"},{"id":"` + InviteID(make([]byte, 32)) + `","secret":"` + b64.EncodeToString(make([]byte, 32)) + `"}]}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenInviteBook(p, c.now); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

func TestInviteBook_IsBounded(t *testing.T) {
	c := &clock{t0}
	book := openBook(t, filepath.Join(t.TempDir(), "invites.json"), c)
	for i := range MaxInvites {
		id := fmt.Sprint(i)
		book.entries[id] = &bookEntry{ID: id, Expires: t0.Add(time.Hour)}
	}
	if _, _, err := book.Create(InviteTerms{}); !errors.Is(err, ErrInviteBookFull) {
		t.Fatalf("Create on a full book: %v", err)
	}
	c.t = t0.Add(time.Hour) // all expire, and are pruned
	if _, _, err := book.Create(InviteTerms{}); err != nil {
		t.Fatal(err)
	}
	if n := len(book.List()); n != 1 {
		t.Fatalf("%d invitations listed", n)
	}
}

// redeemErr is RedeemProof's error alone.
func redeemErr(b *InviteBook, id string, proof []byte, p peer.ID, agentID string) error {
	_, err := b.RedeemProof(id, proof, p, agentID)
	return err
}
