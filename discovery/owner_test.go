package discovery

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p-kad-dht/records"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// authority is a fake certificate authority: a certificate is the string "cert:<agent>:<peer>",
// valid once issued. Its check is a Validator's CertCheck.
type authority struct {
	mu     sync.Mutex
	issued map[string]bool
}

func newAuthority() *authority { return &authority{issued: map[string]bool{}} }

func certFor(agent string, p peer.ID) string { return fmt.Sprintf("cert:%s:%s", agent, p) }

// issue binds agent to p and returns the certificate.
func (a *authority) issue(agent string, p peer.ID) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := certFor(agent, p)
	a.issued[c] = true
	return c
}

func (a *authority) check(cert, agentID string, p peer.ID) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cert != certFor(agentID, p) || !a.issued[cert] {
		return fmt.Errorf("certificate %q does not bind %s to %s", cert, agentID, p)
	}
	return nil
}

// recordOf is agent's record signed by sk: seq, expiring in an hour from now, Left or live,
// with cert.
func recordOf(t *testing.T, sk crypto.PrivKey, agent string, seq uint64, now time.Time, left bool, cert string) []byte {
	t.Helper()
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	r := Record{AgentID: agent, PeerID: id, Seq: seq, Expires: now.Add(time.Hour), Left: left, Cert: cert}
	if !left {
		r.Addrs = []ma.Multiaddr{ma.StringCast("/ip4/10.0.0.1/tcp/4001")}
		r.Manifest = manifestFor(1)
		r.Manifest.AgentID = agent
	}
	return mustSign(t, r, sk)
}

// valueStore is kad-dht's value store (what PUT_VALUE and the local PutValue write through)
// over a bounded store, with the agent-record validators of the given certificate check.
func valueStore(t *testing.T, clock *fakeClock, check func(string, string, peer.ID) error) *records.ValueStore {
	t.Helper()
	_, self := testKey(t)
	s := newBoundedStore(self, clock.Now, DefaultMaxStoredRecords, DefaultMaxStoredBytes, DefaultMaxStoredPerPeer)
	return records.NewValueStore(s, record.NamespacedValidator{
		AgentNamespace: Validator{Namespace: AgentNamespace, Now: clock.Now, CertCheck: check},
		PeerNamespace:  Validator{Namespace: PeerNamespace, Now: clock.Now, CertCheck: check},
	}, MaxRecordLifetime)
}

func put(vs *records.ValueStore, key string, val []byte) error {
	return vs.Put(context.Background(), key, record.MakePutRecord(key, val))
}

// storedRecord is the record vs holds under key.
func storedRecord(t *testing.T, vs *records.ValueStore, key string) Record {
	t.Helper()
	rec, err := vs.Get(context.Background(), key)
	if err != nil || rec == nil {
		t.Fatalf("nothing stored under %s (%v)", key, err)
	}
	r, err := DecodeRecord(rec.GetValue())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A seq is the publisher's clock in unix ns: the validator refuses one more than ClockSkew ahead
// of its own clock (seq 2^64-1 would otherwise win every Select for ever), and sets no lower
// bound: an old seq only loses, and the expiry already bounds a record's life.
func TestValidatorRefusesSeqAheadOfClock(t *testing.T) {
	clock := newFakeClock()
	sk, id := testKey(t)
	now := clock.Now()
	v := Validator{Namespace: AgentNamespace, Now: clock.Now}
	nowNS := uint64(now.UnixNano())
	for _, c := range []struct {
		name string
		seq  uint64
		ok   bool
	}{
		{"2^64-1", math.MaxUint64, false},
		{"one ns past the skew", nowNS + uint64(ClockSkew) + 1, false},
		{"an hour ahead", nowNS + uint64(time.Hour), false},
		{"exactly the skew ahead", nowNS + uint64(ClockSkew), true},
		{"now", nowNS, true},
		{"a day old", nowNS - uint64(24*time.Hour), true},
		{"1", 1, true},
	} {
		err := v.Validate(AgentKey(agentID(1)), mustSign(t, testRecord(id, c.seq, now.Add(time.Hour)), sk))
		if (err == nil) != c.ok {
			t.Errorf("seq %s: Validate = %v; want accepted %v", c.name, err, c.ok)
		}
	}
}

// Attack 1 and 2 against a store: another peer's record for bob's agent, with seq 2^64-1 or a
// present one, live or Left, never replaces the record bob stored; bob's own update and
// tombstone do. Once bob left, another peer may claim the agent (open mode).
func TestStoreKeepsOwnersRecord(t *testing.T) {
	clock := newFakeClock()
	vs := valueStore(t, clock, nil)
	bobSK, bobID := testKey(t)
	eveSK, _ := testKey(t)
	bob, key := agentID(1), AgentKey(agentID(1))
	now := clock.Now()
	seq := uint64(now.UnixNano())
	if err := put(vs, key, recordOf(t, bobSK, bob, seq, now, false, "")); err != nil {
		t.Fatalf("bob's record was refused: %v", err)
	}

	attacks := map[string][]byte{
		"seq 2^64-1":            recordOf(t, eveSK, bob, math.MaxUint64, now, false, ""),
		"present seq, higher":   recordOf(t, eveSK, bob, seq+uint64(time.Second), now, false, ""),
		"forged tombstone":      recordOf(t, eveSK, bob, seq+1, now, true, ""),
		"forged tombstone, max": recordOf(t, eveSK, bob, math.MaxUint64, now, true, ""),
	}
	for name, val := range attacks {
		if err := put(vs, key, val); err == nil {
			t.Errorf("%s: another peer's record replaced bob's", name)
		}
		if r := storedRecord(t, vs, key); r.PeerID != bobID || r.Seq != seq || r.Left {
			t.Fatalf("%s: the store holds %+v; want bob's seq %d", name, r, seq)
		}
	}

	clock.Advance(time.Minute)
	now = clock.Now()
	if err := put(vs, key, recordOf(t, bobSK, bob, uint64(now.UnixNano()), now, false, "")); err != nil {
		t.Fatalf("bob's update was refused: %v", err)
	}
	if err := put(vs, key, recordOf(t, bobSK, bob, seq, now, false, "")); !errors.Is(err, records.ErrOldRecord) {
		t.Fatalf("bob's older record replaced his newer one: %v", err)
	}
	clock.Advance(time.Second)
	now = clock.Now()
	if err := put(vs, key, recordOf(t, bobSK, bob, uint64(now.UnixNano()), now, true, "")); err != nil {
		t.Fatalf("bob's tombstone was refused: %v", err)
	}
	if r := storedRecord(t, vs, key); r.PeerID != bobID || !r.Left {
		t.Fatalf("the store holds %+v; want bob's tombstone", r)
	}
	if err := put(vs, key, recordOf(t, eveSK, bob, uint64(now.UnixNano()), now, false, "")); err != nil {
		t.Fatalf("after bob left, another peer's live record was refused: %v", err)
	}
}

// In authority mode (CertCheck set) a record is stored only with a certificate that binds its
// agent to the peer that signed it, under the agent key and the peer key alike; the owner's
// update and tombstone are accepted, and the authority may move the agent to another peer.
func TestCertificateModeStoresOnlyCertifiedRecords(t *testing.T) {
	clock := newFakeClock()
	ca := newAuthority()
	vs := valueStore(t, clock, ca.check)
	bobSK, bobID := testKey(t)
	eveSK, eveID := testKey(t)
	bob, key := agentID(1), AgentKey(agentID(1))
	bobCert := ca.issue(bob, bobID)
	eveCert := ca.issue(agentID(2), eveID) // eve is certified, for another agent
	now := clock.Now()
	seq := uint64(now.UnixNano())

	refused := map[string]struct {
		key string
		val []byte
	}{
		"bob without certificate":               {key, recordOf(t, bobSK, bob, seq, now, false, "")},
		"bob with a certificate for eve's peer": {key, recordOf(t, bobSK, bob, seq, now, false, certFor(bob, eveID))},
		"bob with eve's certificate":            {key, recordOf(t, bobSK, bob, seq, now, false, eveCert)},
		"bob's tombstone without certificate":   {key, recordOf(t, bobSK, bob, seq, now, true, "")},
		"under bob's peer key, no certificate":  {PeerKey(bobID), recordOf(t, bobSK, bob, seq, now, false, "")},
	}
	for name, c := range refused {
		if err := put(vs, c.key, c.val); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
	if err := put(vs, key, recordOf(t, bobSK, bob, seq, now, false, bobCert)); err != nil {
		t.Fatalf("bob's certified record was refused: %v", err)
	}
	if err := put(vs, PeerKey(bobID), recordOf(t, bobSK, bob, seq, now, false, bobCert)); err != nil {
		t.Fatalf("bob's certified record was refused under his peer key: %v", err)
	}

	attacks := map[string]struct {
		key string
		val []byte
	}{
		"eve, copying bob's certificate":           {key, recordOf(t, eveSK, bob, seq+1, now, false, bobCert)},
		"eve, her own certificate":                 {key, recordOf(t, eveSK, bob, seq+1, now, false, eveCert)},
		"eve's tombstone with bob's certificate":   {key, recordOf(t, eveSK, bob, seq+1, now, true, bobCert)},
		"eve's peer record claiming bob's agent":   {PeerKey(eveID), recordOf(t, eveSK, bob, seq+1, now, false, bobCert)},
		"bob's certified record with seq 2^64 - 1": {key, recordOf(t, bobSK, bob, math.MaxUint64, now, false, bobCert)},
	}
	for name, c := range attacks {
		if err := put(vs, c.key, c.val); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
	if r := storedRecord(t, vs, key); r.PeerID != bobID || r.Seq != seq {
		t.Fatalf("the store holds %+v; want bob's seq %d", r, seq)
	}

	clock.Advance(time.Minute)
	now = clock.Now()
	if err := put(vs, key, recordOf(t, bobSK, bob, uint64(now.UnixNano()), now, false, bobCert)); err != nil {
		t.Fatalf("bob's certified update was refused: %v", err)
	}
	clock.Advance(time.Second)
	now = clock.Now()
	if err := put(vs, key, recordOf(t, bobSK, bob, uint64(now.UnixNano()), now, true, bobCert)); err != nil {
		t.Fatalf("bob's certified tombstone was refused: %v", err)
	}
	if r := storedRecord(t, vs, key); !r.Left || r.PeerID != bobID {
		t.Fatalf("the store holds %+v; want bob's tombstone", r)
	}

	// the authority moves bob's agent to eve's peer: her certified record, newer, replaces.
	clock.Advance(time.Second)
	now = clock.Now()
	moved := ca.issue(bob, eveID)
	if err := put(vs, key, recordOf(t, eveSK, bob, uint64(now.UnixNano()), now, false, moved)); err != nil {
		t.Fatalf("the agent's certified new host was refused: %v", err)
	}
	if r := storedRecord(t, vs, key); r.PeerID != eveID || r.Left {
		t.Fatalf("the store holds %+v; want eve's record", r)
	}
}

// Select, value by value: which of the values a store or a lookup keeps.
func TestSelectOwnerRule(t *testing.T) {
	clock := newFakeClock()
	now := clock.Now()
	at := func(d time.Duration) uint64 { return uint64(now.Add(d).UnixNano()) }
	ca := newAuthority()
	bobSK, bobID := testKey(t)
	eveSK, eveID := testKey(t)
	selfSK, selfID := testKey(t)
	a := agentID(1)
	bobCert, eveCert := ca.issue(a, bobID), ca.issue(a, eveID)

	bobOld := recordOf(t, bobSK, a, at(-2*time.Second), now, false, "")
	bobNew := recordOf(t, bobSK, a, at(-time.Second), now, false, "")
	bobLeft := recordOf(t, bobSK, a, at(0), now, true, "")
	eve := recordOf(t, eveSK, a, at(0), now, false, "")
	eveLeft := recordOf(t, eveSK, a, at(0), now, true, "")
	eveMax := recordOf(t, eveSK, a, math.MaxUint64, now, false, "")
	eveCertified := recordOf(t, eveSK, a, at(0), now, false, eveCert)
	self := recordOf(t, selfSK, a, at(-3*time.Second), now, false, "")
	bobOldCert := recordOf(t, bobSK, a, at(-2*time.Second), now, false, bobCert)
	bobNewCert := recordOf(t, bobSK, a, at(-time.Second), now, false, bobCert)
	bobLeftCert := recordOf(t, bobSK, a, at(0), now, true, bobCert)
	eveWithBobsCert := recordOf(t, eveSK, a, at(0), now, false, bobCert)

	open := Validator{Namespace: AgentNamespace, Now: clock.Now, Self: selfID}
	certified := Validator{Namespace: AgentNamespace, Now: clock.Now, Self: selfID, CertCheck: ca.check}
	junk := []byte("junk")
	for _, c := range []struct {
		name string
		v    Validator
		vals [][]byte
		want int
	}{
		{"same peer: the higher seq, second", open, [][]byte{bobOld, bobNew}, 1},
		{"same peer: the higher seq, first", open, [][]byte{bobNew, bobOld}, 0},
		{"same peer: the first of equals", open, [][]byte{bobNew, bobNew}, 0},
		{"same peer: the owner's tombstone", open, [][]byte{bobLeft, bobNew}, 0},
		{"open: another peer's higher seq does not displace the stored record", open, [][]byte{eve, bobOld}, 1},
		{"open: two peers' live records, the later one", open, [][]byte{bobOld, eve}, 1},
		{"open: a live record beats another peer's tombstone", open, [][]byte{eveLeft, bobNew}, 1},
		{"open: a live record beats another peer's tombstone, first", open, [][]byte{bobNew, eveLeft}, 0},
		{"open: a live record replaces another peer's tombstone", open, [][]byte{eve, bobLeft}, 0},
		{"open: the local peer's own record, first", open, [][]byte{self, eve}, 0},
		{"open: the local peer's own record, second", open, [][]byte{eve, self}, 1},
		{"open: a seq ahead of the clock is never selected", open, [][]byte{eveMax, bobOld}, 1},
		{"open: junk is never selected", open, [][]byte{junk, bobOld}, 1},
		{"open: a certificate does not rank", open, [][]byte{eveCertified, bobOld}, 1},
		{"open: three values fold left to right", open, [][]byte{bobOld, eve, bobNew}, 2},
		{"certified: the higher seq, whichever peer", certified, [][]byte{eveCertified, bobNewCert}, 0},
		{"certified: the higher seq, whichever peer, second", certified, [][]byte{bobOldCert, eveCertified}, 1},
		{"certified: a record without certificate is never selected", certified, [][]byte{bobNew, bobOldCert}, 1},
		{"certified: a certificate of another peer is never selected", certified, [][]byte{eveWithBobsCert, bobOldCert}, 1},
		{"certified: the owner's tombstone, newer", certified, [][]byte{bobNewCert, bobLeftCert}, 1},
		{"certified: the local peer's uncertified record is never selected", certified, [][]byte{self, bobOldCert}, 1},
	} {
		got, err := c.v.Select(AgentKey(a), c.vals)
		if err != nil || got != c.want {
			t.Errorf("%s: Select = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	if _, err := certified.Select(AgentKey(a), [][]byte{bobNew, eve}); err == nil {
		t.Error("certified: Select chose among values without certificates")
	}
}

// Attacks 1 and 2 against a mesh: a malicious DHT server (it stores and serves anything) puts a
// record for bob's agent with seq 2^64-1 and a forged tombstone for alice's, both signed with
// its own key. Every node still resolves bob's genuine record and a live alice, and bob can
// still update his record.
func TestOwnerRecordSurvivesForgeriesInMesh(t *testing.T) {
	const n = 8
	m := newMesh(t, n, 1, WithCacheTTL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	bob, alice := agentID(2), agentID(3)
	genuine, err := m.ds[0].Resolve(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}

	evil, _, sk := m.addAttacker(t, ctx)

	now := time.Now()
	maxSeq := recordOf(t, sk, bob, math.MaxUint64, now, false, "")
	tombstone := recordOf(t, sk, alice, uint64(now.UnixNano()), now, true, "")
	_ = evil.PutValue(ctx, AgentKey(bob), maxSeq)
	_ = evil.PutValue(ctx, AgentKey(alice), tombstone)

	for i := range n {
		r, err := m.ds[i].Resolve(ctx, bob)
		if err != nil {
			t.Fatalf("node %d: bob: %v", i, err)
		}
		if r.PeerID != genuine.PeerID || r.Seq < genuine.Seq {
			t.Fatalf("node %d resolved bob to peer %s seq %d; want the genuine %s seq %d", i, r.PeerID, r.Seq, genuine.PeerID, genuine.Seq)
		}
		r, err = m.ds[i].Resolve(ctx, alice)
		if err != nil {
			t.Fatalf("node %d: alice: %v", i, err)
		}
		if r.PeerID != m.hosts[3].ID() || r.Left {
			t.Fatalf("node %d resolved alice to %+v; want her live record", i, r)
		}
	}

	// bob updates his record: the 2^64-1 one blocks nothing.
	upd := manifestFor(2)
	upd.Tools = append(upd.Tools, "gpu")
	if err := m.ds[2].Publish(ctx, upd); err != nil {
		t.Fatal(err)
	}
	want := m.ds[2].Status().Seq
	if want <= genuine.Seq {
		t.Fatalf("bob's new seq %d is not above %d", want, genuine.Seq)
	}
	for i := range n {
		r, err := m.ds[i].Resolve(ctx, bob)
		if err != nil {
			t.Fatalf("node %d: bob after his update: %v", i, err)
		}
		if r.PeerID != genuine.PeerID || r.Seq < want {
			t.Fatalf("node %d resolved bob to peer %s seq %d; want his update, seq %d", i, r.PeerID, r.Seq, want)
		}
	}
}

// Authority mode end to end: nodes with WithCertCheck and WithCertificate publish certified
// records that every node resolves; a node whose certificate binds its agent to another peer
// cannot publish; Leave's certified tombstone is accepted.
func TestCertificateModeMesh(t *testing.T) {
	const n = 5
	ca := newAuthority()
	m := newMeshWith(t, n, 1, func(i int, id peer.ID) []Option {
		cert := ca.issue(agentID(i), id)
		if i == n-1 {
			cert = certFor(agentID(i), "someone-else") // never issued for this peer
		}
		return []Option{WithCertificate(func() string { return cert })}
	}, WithCacheTTL(0), WithCertCheck(ca.check))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	for i := range n - 1 {
		if err := m.ds[i].Publish(ctx, manifestFor(i)); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	if err := m.ds[n-1].Publish(ctx, manifestFor(n-1)); err == nil {
		t.Fatal("a node published a record its certificate does not cover")
	}
	for i := range n {
		for j := range n - 1 {
			r, err := m.ds[i].Resolve(ctx, agentID(j))
			if err != nil {
				t.Fatalf("node %d resolving agent %d: %v", i, j, err)
			}
			if r.PeerID != m.hosts[j].ID() || r.Cert != certFor(agentID(j), m.hosts[j].ID()) {
				t.Fatalf("node %d resolved agent %d to %+v", i, j, r)
			}
		}
	}
	if err := m.ds[1].Leave(ctx); err != nil {
		t.Fatalf("the certified tombstone was refused: %v", err)
	}
	for i := range n {
		if _, err := m.ds[i].Resolve(ctx, agentID(1)); err == nil {
			t.Fatalf("node %d still resolves agent 1 after it left", i)
		}
	}
}

// The directory cache follows the owner rule: an attacker that provides a capability and, under
// its own peer key, publishes a record claiming bob's agent id is found by FindByCapability (open
// mode cannot tell it from bob), but where bob resolves does not change, on a node that had
// bob cached and on one that had not.
func TestPeerKeyClaimDoesNotMoveCachedAgent(t *testing.T) {
	const n = 6
	m := newMesh(t, n, 1) // the cache on, with its default TTL
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	bob := agentID(2)
	genuine, err := m.ds[0].Resolve(ctx, bob) // node 0 caches bob; node 1 has not looked him up
	if err != nil {
		t.Fatal(err)
	}

	evil, h, sk := m.addAttacker(t, ctx)
	now := time.Now()
	claim := recordOf(t, sk, bob, uint64(now.UnixNano()), now, false, "") // newer than bob's
	if err := evil.PutValue(ctx, PeerKey(h.ID()), claim); err != nil {
		t.Fatalf("the attacker's peer-key record was not stored: %v", err)
	}
	terminal, err := CapabilityCID(KindTool, "terminal")
	if err != nil {
		t.Fatal(err)
	}
	if err := evil.Provide(ctx, terminal, true); err != nil {
		t.Fatalf("the attacker could not provide: %v", err)
	}

	for _, i := range []int{0, 1} {
		recs, err := m.ds[i].FindByCapability(ctx, KindTool, "terminal")
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		seen := false
		for _, r := range recs {
			seen = seen || r.PeerID == h.ID()
		}
		if !seen {
			t.Fatalf("node %d: FindByCapability did not fetch the attacker's record; the test proves nothing", i)
		}
		r, err := m.ds[i].Resolve(ctx, bob)
		if err != nil {
			t.Fatalf("node %d: bob: %v", i, err)
		}
		if r.PeerID != genuine.PeerID || r.Seq < genuine.Seq {
			t.Fatalf("node %d resolved bob to peer %s seq %d; want the genuine %s seq %d", i, r.PeerID, r.Seq, genuine.PeerID, genuine.Seq)
		}
	}
}
