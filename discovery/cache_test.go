package discovery

import (
	"math"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestCacheExpiryAndSeq(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	r5 := testRecord(id, 5, clock.Now().Add(time.Hour))
	c.put(r5)
	if got, ok := c.lookup(r5.AgentID); !ok || got.Seq != 5 {
		t.Fatalf("lookup after put = %v, %v", got.Seq, ok)
	}
	if got, ok := c.lookupPeer(id); !ok || got.AgentID != r5.AgentID {
		t.Fatalf("lookupPeer after put = %v, %v", got, ok)
	}
	// a lower seq seen later does not replace the cached record
	if got := c.put(testRecord(id, 3, clock.Now().Add(time.Hour))); got.Seq != 5 {
		t.Fatalf("stale record replaced the cached one: seq %d", got.Seq)
	}
	// a higher seq does
	c.put(testRecord(id, 8, clock.Now().Add(time.Hour)))
	if got, _ := c.lookup(r5.AgentID); got.Seq != 8 {
		t.Fatalf("higher seq did not replace: %d", got.Seq)
	}
	clock.Advance(59 * time.Second)
	if _, ok := c.lookup(r5.AgentID); !ok {
		t.Fatal("entry gone before the cache TTL")
	}
	clock.Advance(time.Second)
	if _, ok := c.lookup(r5.AgentID); ok {
		t.Fatal("entry served after the cache TTL")
	}
	if _, ok := c.lookupPeer(id); ok {
		t.Fatal("peer index served after the cache TTL")
	}
}

func TestCacheRecordExpiryBoundsEntry(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	c.put(testRecord(id, 1, clock.Now().Add(10*time.Second)))
	clock.Advance(10 * time.Second)
	if _, ok := c.lookup(agentID(1)); ok {
		t.Fatal("served a record past its own expiry")
	}
}

func TestCacheLeftEvictsAndTombstones(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	c.put(testRecord(id, 5, clock.Now().Add(time.Hour)))
	left := testRecord(id, 6, clock.Now().Add(time.Hour))
	left.Left = true
	c.put(left)
	got, ok := c.lookup(agentID(1))
	if !ok || !got.Left {
		t.Fatalf("after a left record: %+v, %v; want a tombstone", got, ok)
	}
	if _, err := live(got); err == nil {
		t.Fatal("a tombstone resolved")
	}
	// a stale copy from a slow DHT peer cannot bring the agent back
	if got := c.put(testRecord(id, 5, clock.Now().Add(time.Hour))); !got.Left {
		t.Fatal("a stale record overrode the tombstone")
	}
	// the agent coming back with a newer record does
	if got := c.put(testRecord(id, 7, clock.Now().Add(time.Hour))); got.Left {
		t.Fatal("a newer record did not replace the tombstone")
	}
}

func TestCacheDisabledAndBounded(t *testing.T) {
	clock := newFakeClock()
	off := newCache(clock.Now, 0, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	off.put(testRecord(id, 1, clock.Now().Add(time.Hour)))
	off.putProviders(capability{KindTool, "web"}, []peer.ID{id})
	if _, ok := off.lookup(agentID(1)); ok {
		t.Fatal("a zero-TTL cache cached")
	}
	if _, ok := off.providersOf(capability{KindTool, "web"}); ok {
		t.Fatal("a zero-TTL cache cached providers")
	}
	small := newCache(clock.Now, time.Minute, 3, Validator{Namespace: AgentNamespace, Now: clock.Now})
	for i := range 10 {
		_, id := testKey(t)
		r := testRecord(id, 1, clock.Now().Add(time.Hour))
		r.AgentID = agentID(i)
		small.put(r)
		clock.Advance(time.Second)
	}
	if n := small.len(); n != 3 {
		t.Fatalf("cache of size 3 holds %d", n)
	}
	if _, ok := small.lookup(agentID(9)); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

func TestCacheProviders(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	web := capability{KindTool, "web"}
	c.putProviders(web, nil)
	if _, ok := c.providersOf(web); ok {
		t.Fatal("an empty provider set was cached")
	}
	c.putProviders(web, []peer.ID{id})
	if ps, ok := c.providersOf(web); !ok || len(ps) != 1 {
		t.Fatalf("providersOf = %v, %v", ps, ok)
	}
	clock.Advance(time.Minute)
	if _, ok := c.providersOf(web); ok {
		t.Fatal("providers served after the TTL")
	}
}

// decoded is the Record of a signed value.
func decoded(t *testing.T, val []byte) Record {
	t.Helper()
	r, err := DecodeRecord(val)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// resolvesTo fails unless the cache resolves agent to a record signed by p with seq.
func resolvesTo(t *testing.T, c *cache, what, agent string, p peer.ID, seq uint64) {
	t.Helper()
	r, ok := c.lookup(agent)
	if !ok || r.PeerID != p || r.Seq != seq {
		t.Fatalf("%s: %s resolves to %s seq %d (cached %v); want %s seq %d", what, agent, r.PeerID, r.Seq, ok, p, seq)
	}
}

// Open mode: the cache applies the owner rule of the stores. Where bob resolves changes only
// with a record the validator's Select would put in place of bob's: an attacker's record that
// claims bob's agent id, learned under the attacker's peer key (a capability lookup) or even
// under bob's agent key, does not change it; bob's own newer record does, and once bob's entry
// expires, the next lookup's answer fills it.
func TestCacheOwnerRuleOpenMode(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	bobSK, bobID := testKey(t)
	eveSK, eveID := testKey(t)
	bob, alice := agentID(1), agentID(2)
	now := clock.Now()
	seq := uint64(now.UnixNano())
	c.put(decoded(t, recordOf(t, bobSK, bob, seq, now, false, ""))) // Resolve(bob) found bob's record

	// eve provides a capability; her peer-key record claims bob's agent id, with a higher seq.
	claim := decoded(t, recordOf(t, eveSK, bob, seq+uint64(time.Second), now, false, ""))
	if got := c.putPeer(claim); got.PeerID != eveID {
		t.Fatalf("putPeer returned %s's record; want the record eve signed", got.PeerID)
	}
	resolvesTo(t, c, "after eve's peer-key claim", bob, bobID, seq)
	if r, ok := c.lookupPeer(eveID); !ok || r.PeerID != eveID || r.AgentID != bob {
		t.Fatalf("eve's peer entry is %+v, %v; want her own claim", r, ok)
	}
	if r, ok := c.lookupPeer(bobID); !ok || r.PeerID != bobID || r.Seq != seq {
		t.Fatalf("bob's peer entry is %+v, %v; want his record", r, ok)
	}
	// nor does a claim by agent key: seq 2^64-1, or a forged tombstone.
	for name, val := range map[string][]byte{
		"seq 2^64-1":       recordOf(t, eveSK, bob, math.MaxUint64, now, false, ""),
		"forged tombstone": recordOf(t, eveSK, bob, seq+2, now, true, ""),
	} {
		if got := c.put(decoded(t, val)); got.PeerID != bobID {
			t.Fatalf("%s: put returned %s's record; want bob's", name, got.PeerID)
		}
		resolvesTo(t, c, name, bob, bobID, seq)
	}
	// a peer-key claim does not fill an agent's empty entry either: alice is looked up in the DHT.
	c.putPeer(decoded(t, recordOf(t, eveSK, alice, seq, now, false, "")))
	if r, ok := c.lookup(alice); ok {
		t.Fatalf("eve's peer-key claim on alice was cached as alice's record: %+v", r)
	}

	// bob's own newer record replaces his, by peer key or by agent key; his older one does not.
	clock.Advance(time.Second)
	now = clock.Now()
	seq2 := uint64(now.UnixNano())
	c.putPeer(decoded(t, recordOf(t, bobSK, bob, seq2, now, false, "")))
	resolvesTo(t, c, "after bob's newer peer-key record", bob, bobID, seq2)
	seq3 := seq2 + 1
	c.put(decoded(t, recordOf(t, bobSK, bob, seq3, now, false, "")))
	resolvesTo(t, c, "after bob's newer record", bob, bobID, seq3)
	c.put(decoded(t, recordOf(t, bobSK, bob, seq, now, false, "")))
	resolvesTo(t, c, "after bob's older record", bob, bobID, seq3)

	// bob's entry expires (cache TTL): the next lookup's answer fills it, whoever signed it; a
	// peer-key claim still does not.
	clock.Advance(time.Minute)
	now = clock.Now()
	c.putPeer(decoded(t, recordOf(t, eveSK, bob, uint64(now.UnixNano()), now, false, "")))
	if r, ok := c.lookup(bob); ok {
		t.Fatalf("after expiry, eve's peer-key claim was cached as bob's record: %+v", r)
	}
	eveSeq := uint64(now.UnixNano()) + 1
	c.put(decoded(t, recordOf(t, eveSK, bob, eveSeq, now, false, "")))
	resolvesTo(t, c, "after expiry, the lookup's answer", bob, eveID, eveSeq)
}

// Open mode: as in a store, a live record replaces another peer's tombstone and the local
// peer's own record replaces another's; the tombstone of another peer never hides a live one.
func TestCacheOwnerRuleTombstonesAndSelf(t *testing.T) {
	clock := newFakeClock()
	selfSK, selfID := testKey(t)
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now, Self: selfID})
	bobSK, _ := testKey(t)
	eveSK, eveID := testKey(t)
	bob := agentID(1)
	now := clock.Now()
	seq := uint64(now.UnixNano())
	c.put(decoded(t, recordOf(t, bobSK, bob, seq, now, true, ""))) // bob left
	c.put(decoded(t, recordOf(t, eveSK, bob, seq-1, now, false, "")))
	resolvesTo(t, c, "eve's live record over bob's tombstone", bob, eveID, seq-1)
	c.put(decoded(t, recordOf(t, bobSK, bob, seq+1, now, true, "")))
	resolvesTo(t, c, "bob's tombstone over eve's live record", bob, eveID, seq-1)
	c.put(decoded(t, recordOf(t, selfSK, bob, seq-2, now, false, "")))
	resolvesTo(t, c, "the local peer's own record", bob, selfID, seq-2)
	c.put(decoded(t, recordOf(t, eveSK, bob, seq+2, now, false, "")))
	resolvesTo(t, c, "eve's record over the local peer's", bob, selfID, seq-2)
}

// Authority mode: every record carries a certificate binding its agent to its signer, so the
// newest wins whoever signed it: a certified record of the agent's new host replaces the old
// host's, by agent key or by peer key (and fills an empty entry); an older one does not.
func TestCacheOwnerRuleCertificateMode(t *testing.T) {
	clock := newFakeClock()
	ca := newAuthority()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now, CertCheck: ca.check})
	bobSK, bobID := testKey(t)
	newSK, newID := testKey(t)
	bob, alice := agentID(1), agentID(2)
	now := clock.Now()
	seq := uint64(now.UnixNano())
	c.put(decoded(t, recordOf(t, bobSK, bob, seq, now, false, ca.issue(bob, bobID))))
	resolvesTo(t, c, "bob's certified record", bob, bobID, seq)

	moved := ca.issue(bob, newID) // the authority moves bob's agent to a new host
	c.putPeer(decoded(t, recordOf(t, newSK, bob, seq+1, now, false, moved)))
	resolvesTo(t, c, "the new host's certified peer-key record", bob, newID, seq+1)
	c.put(decoded(t, recordOf(t, newSK, bob, seq+2, now, false, moved)))
	resolvesTo(t, c, "the new host's certified record", bob, newID, seq+2)
	c.put(decoded(t, recordOf(t, bobSK, bob, seq+1, now, false, ca.issue(bob, bobID))))
	resolvesTo(t, c, "the old host's older record", bob, newID, seq+2)

	c.putPeer(decoded(t, recordOf(t, newSK, alice, seq, now, false, ca.issue(alice, newID))))
	resolvesTo(t, c, "a certified peer-key record fills an empty entry", alice, newID, seq)
}

// The cache keeps, of a cached record and an incoming one, the one Select keeps when a store
// holding the first receives the second: one rule, in both modes, for every pair.
func TestCacheAgreesWithSelect(t *testing.T) {
	clock := newFakeClock()
	now := clock.Now()
	at := func(d time.Duration) uint64 { return uint64(now.Add(d).UnixNano()) }
	ca := newAuthority()
	bobSK, bobID := testKey(t)
	eveSK, eveID := testKey(t)
	selfSK, selfID := testKey(t)
	a := agentID(1)
	var open, certified [][]byte
	for _, k := range []struct {
		sk crypto.PrivKey
		id peer.ID
	}{{bobSK, bobID}, {eveSK, eveID}, {selfSK, selfID}} {
		cert := ca.issue(a, k.id)
		for _, seq := range []uint64{at(-2 * time.Second), at(-time.Second)} {
			for _, left := range []bool{false, true} {
				open = append(open, recordOf(t, k.sk, a, seq, now, left, ""))
				certified = append(certified, recordOf(t, k.sk, a, seq, now, left, cert))
			}
		}
	}
	for _, mode := range []struct {
		name string
		v    Validator
		vals [][]byte
	}{
		{"open", Validator{Namespace: AgentNamespace, Now: clock.Now, Self: selfID}, open},
		{"certified", Validator{Namespace: AgentNamespace, Now: clock.Now, Self: selfID, CertCheck: ca.check}, certified},
	} {
		for i, held := range mode.vals {
			for j, incoming := range mode.vals {
				want, err := mode.v.Select(AgentKey(a), [][]byte{incoming, held})
				if err != nil {
					t.Fatal(err)
				}
				c := newCache(clock.Now, time.Minute, 100, mode.v)
				c.put(decoded(t, held))
				in := decoded(t, incoming)
				got := c.put(in)
				if kept := got.PeerID == in.PeerID && got.Seq == in.Seq && got.Left == in.Left; kept != (want == 0) {
					t.Errorf("%s: cached %d, incoming %d: the cache keeps %s seq %d left %v; Select keeps value %d", mode.name, i, j, got.PeerID, got.Seq, got.Left, want)
				}
			}
		}
	}
}

// In authority mode the cache answers only with records whose certificate still stands: one
// revoked since it was cached is dropped at the next lookup, by agent and by peer, so that the
// DHT is asked again.
func TestCacheDropsARecordWhoseCertificateNoLongerStands(t *testing.T) {
	clock := newFakeClock()
	ca := newAuthority()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now, CertCheck: ca.check})
	_, id := testKey(t)
	r := testRecord(id, 5, clock.Now().Add(time.Hour))
	r.Cert = ca.issue(r.AgentID, id)
	c.put(r)
	if _, ok := c.lookup(r.AgentID); !ok {
		t.Fatal("a record with a standing certificate is not served")
	}
	ca.mu.Lock()
	delete(ca.issued, r.Cert) // revoked
	ca.mu.Unlock()
	if _, ok := c.lookup(r.AgentID); ok {
		t.Fatal("a record whose certificate was revoked is still served")
	}
	if _, ok := c.lookupPeer(id); ok {
		t.Fatal("the peer index still serves the revoked record")
	}
}

// A peer that could not be reached at the addresses of its cached record loses the entry, under
// its agent and under itself, so that the next lookup asks the DHT; another peer's report does
// not touch it, nor does a report on a record found during the resolve it followed (the DHT
// would give it again), nor one on a tombstone.
func TestCacheDropsTheRecordOfAnUnreachablePeer(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	_, other := testKey(t)
	r := testRecord(id, 5, clock.Now().Add(time.Hour))
	resolving := clock.Now()
	c.put(r)
	if c.drop(r.AgentID, id, resolving) {
		t.Fatal("a record found by the resolve the report follows was dropped")
	}
	clock.Advance(time.Second)
	if c.drop(r.AgentID, other, clock.Now()) {
		t.Fatal("a report naming another peer dropped the agent's record")
	}
	if !c.drop(r.AgentID, id, clock.Now()) {
		t.Fatal("the record of the unreachable peer was not dropped")
	}
	if _, ok := c.lookup(r.AgentID); ok {
		t.Fatal("the agent still resolves from the cache")
	}
	if _, ok := c.lookupPeer(id); ok {
		t.Fatal("the peer index still serves the dropped record")
	}
	left := testRecord(id, 6, clock.Now().Add(time.Hour))
	left.Left = true
	c.put(left)
	clock.Advance(time.Second)
	if c.drop(left.AgentID, id, clock.Now()) {
		t.Fatal("a tombstone was dropped: an agent that left has no stale address")
	}
}
