package discovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	ds "github.com/ipfs/go-datastore"
	dsq "github.com/ipfs/go-datastore/query"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	recpb "github.com/libp2p/go-libp2p-record/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"
)

// A peer that signs records for more agent ids than its quota keeps its newest records up to
// the quota; the records of other peers are never evicted for it.
func TestStorePeerOverQuotaKeepsItsNewestAndNoOneElses(t *testing.T) {
	const quota = 8
	r := newStoreRig(t, 1000, DefaultMaxStoredBytes, quota)
	honest, honestID := testKey(t)
	r.publish(honest, 500, 0)
	hostile, hostileID := testKey(t)
	for i := range 20 {
		val := r.signed(hostile, i, 0)
		if err := r.putValue(AgentKey(agentID(i)), val); err != nil {
			t.Fatalf("agent %d: %v", i, err)
		}
		r.check()
	}
	if got := r.held(hostileID); got != quota {
		t.Fatalf("the hostile peer holds %d records; its quota is %d", got, quota)
	}
	for i := range 20 {
		if kept := r.has(AgentKey(agentID(i))); kept != (i >= 20-quota) {
			t.Fatalf("agent %d kept = %v: the peer's newest %d records stay, the older go", i, kept, quota)
		}
	}
	if r.held(honestID) != 2 || !r.has(AgentKey(agentID(500))) || !r.has(PeerKey(honestID)) {
		t.Fatal("another peer's records were evicted for the hostile peer's")
	}
	if st := r.s.Stats(); st.EvictedQuota != 20-quota || st.EvictedFull != 0 || st.Entries != quota+2 {
		t.Fatalf("stats %+v: want %d quota evictions, none for the totals, %d entries", st, 20-quota, quota+2)
	}
}

// Provider records are charged to the provider named in the key: a peer providing more keys
// than its quota is answered for its newest keys only, and other providers of those keys stay.
func TestStoreChargesProviderRecordsToTheProvider(t *testing.T) {
	const quota = 4
	r := newStoreRig(t, 1000, DefaultMaxStoredBytes, quota)
	_, honest := testKey(t)
	_, hostile := testKey(t)
	for n := range 3 {
		if err := r.provide(honest, n); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 10 {
		if err := r.provide(hostile, n); err != nil {
			t.Fatal(err)
		}
		r.check()
	}
	if r.held(hostile) != quota || r.held(honest) != 3 {
		t.Fatalf("hostile holds %d (quota %d), honest %d (3)", r.held(hostile), quota, r.held(honest))
	}
	for n := range 10 {
		got := r.providers(n)
		if got[hostile] != (n >= 10-quota) {
			t.Fatalf("tool%d: hostile listed = %v; only its newest %d keys stay", n, got[hostile], quota)
		}
		if got[honest] != (n < 3) {
			t.Fatalf("tool%d: honest listed = %v", n, got[honest])
		}
	}
}

// A provider record the store evicted is not answered from a cache: kad-dht's own provider
// cache would keep serving it (and keep growing) for a key that was read before.
func TestStoreEvictedProviderIsNotServedFromACache(t *testing.T) {
	r := newStoreRig(t, 1000, DefaultMaxStoredBytes, 3)
	_, hostile := testKey(t)
	if err := r.provide(hostile, 0); err != nil {
		t.Fatal(err)
	}
	if !r.providers(0)[hostile] { // a read: kad-dht's cache would now hold tool0's set
		t.Fatal("the provider is not answered")
	}
	for n := 1; n <= 3; n++ {
		if err := r.provide(hostile, n); err != nil {
			t.Fatal(err)
		}
	}
	if r.providers(0)[hostile] {
		t.Fatal("an evicted provider record is still answered")
	}
}

// Under a flood of many peers, each within its quota, the totals hold after every put, and the
// peers that hold the most lose records first: honest peers, holding two records each, keep
// them all.
func TestStoreTotalsHoldUnderAFloodOfPeers(t *testing.T) {
	const maxEntries, quota, honestPeers, flooders = 200, 16, 20, 100
	r := newStoreRig(t, maxEntries, DefaultMaxStoredBytes, quota)
	honest := make([]peer.ID, honestPeers)
	for i := range honest {
		var sk crypto.PrivKey
		sk, honest[i] = testKey(t)
		r.publish(sk, i, 0)
	}
	for range flooders {
		_, f := testKey(t)
		for n := range quota {
			if err := r.provide(f, n); err != nil {
				t.Fatal(err)
			}
			r.check()
		}
	}
	for i, id := range honest {
		if r.held(id) != 2 || !r.has(AgentKey(agentID(i))) {
			t.Fatalf("honest peer %d holds %d records; the flood took them", i, r.held(id))
		}
	}
	st := r.s.Stats()
	if want := uint64(2*honestPeers + flooders*quota - maxEntries); st.Entries != maxEntries || st.EvictedFull != want {
		t.Fatalf("stats %+v: want %d entries and %d evicted", st, maxEntries, want)
	}
}

// The byte total holds too: peers storing records of 60 KiB lose them before peers storing
// small ones.
func TestStoreByteTotalHoldsUnderAFloodOfLargeRecords(t *testing.T) {
	const maxBytes = minStoredBytes
	r := newStoreRig(t, 1000, maxBytes, 4)
	honest := make([]peer.ID, 5)
	for i := range honest {
		var sk crypto.PrivKey
		sk, honest[i] = testKey(t)
		r.publish(sk, i, 0)
	}
	for f := range 10 {
		sk, _ := testKey(t)
		for j := range 4 {
			i := 100 + 4*f + j
			if err := r.putValue(AgentKey(agentID(i)), r.signed(sk, i, 60<<10)); err != nil && !errors.Is(err, ErrStoreFull) {
				t.Fatal(err)
			}
			r.check()
		}
	}
	for i, id := range honest {
		if r.held(id) != 2 {
			t.Fatalf("honest peer %d holds %d records; the large ones took them", i, r.held(id))
		}
	}
	if st := r.s.Stats(); st.Bytes > maxBytes || st.EvictedFull == 0 {
		t.Fatalf("stats %+v: the byte bound %d was not enforced", st, maxBytes)
	}
}

// The local node's own records are never evicted, whatever the quota and the flood; when they
// alone fill the store, a put is refused with ErrStoreFull rather than evict them.
func TestStoreNeverEvictsTheLocalNode(t *testing.T) {
	const maxEntries, quota = 100, 8
	r := newStoreRig(t, maxEntries, DefaultMaxStoredBytes, quota)
	r.publish(r.selfKey, 0, 0)
	for n := range 20 { // more capabilities than the quota
		if err := r.provide(r.self, n); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		_, f := testKey(t)
		for n := range quota {
			if err := r.provide(f, 100+n); err != nil {
				t.Fatal(err)
			}
		}
		r.check()
	}
	st := r.s.Stats()
	if st.LocalEntries != 22 || !r.has(AgentKey(agentID(0))) || !r.has(PeerKey(r.self)) || st.Entries != maxEntries {
		t.Fatalf("stats %+v: the local node's 22 records must all stay in a full store", st)
	}
	for n := range 20 {
		if !r.providers(n)[r.self] {
			t.Fatalf("the local node's provider record of tool%d was evicted", n)
		}
	}
	for n := 20; r.s.Stats().LocalEntries < maxEntries; n++ {
		if err := r.provide(r.self, n); err != nil {
			t.Fatalf("local record %d: %v", n, err)
		}
	}
	_, late := testKey(t)
	if err := r.provide(late, 0); err == nil || r.held(late) != 0 {
		t.Fatalf("a put into a store full of local records: %v; want it refused", err)
	}
	err := r.s.Put(context.Background(), ds.NewKey("/providers/x/y"), []byte{1})
	if !errors.Is(err, ErrStoreFull) {
		t.Fatalf("err = %v, want ErrStoreFull", err)
	}
	if err := r.provide(r.self, 1000); err == nil {
		t.Fatal("a local record beyond the limit was stored")
	}
	if r.s.Stats().LocalEntries != maxEntries {
		t.Fatal("a refused put evicted a local record")
	}
}

// A put refused with ErrStoreFull leaves the store as it was: the value it would have replaced
// stays.
func TestStoreRefusedPutKeepsThePreviousValue(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	self, other := randomPeer(t, rng), randomPeer(t, rng)
	s := newBoundedStore(self, newFakeClock().Now, 100, 8<<10, 10)
	put := func(key string, signer peer.ID, pad int) error {
		return s.Put(ctx, ds.NewKey(key), envelope(t, fmt.Sprintf(`{"record":{"peer_id":%q,"pad":%q}}`, signer, strings.Repeat("x", pad))))
	}
	for i := range 4 { // 4 x 1.6 KiB charged, of 8 KiB
		if err := put(fmt.Sprintf("/iacp-agent/L%d", i), self, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("/iacp-agent/K", other, 10); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Get(ctx, ds.NewKey("/iacp-agent/K"))
	if err := put("/iacp-agent/K", other, 3000); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("err = %v: the only record that could go is the new one", err)
	}
	after, err := s.Get(ctx, ds.NewKey("/iacp-agent/K"))
	if err != nil || !slices.Equal(before, after) {
		t.Fatalf("the refused put lost the previous value: %v", err)
	}
	if err := s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A record that has expired is neither served nor kept: it goes at the next operation on the
// store, before anything live is evicted to make room.
func TestStoreDropsExpiredRecords(t *testing.T) {
	r := newStoreRig(t, 100, DefaultMaxStoredBytes, 50)
	signers := make([]crypto.PrivKey, 4)
	for i := range signers {
		signers[i], _ = testKey(t)
	}
	for i := range 40 {
		if err := r.putValue(AgentKey(agentID(i)), r.signed(signers[i%4], i, 0)); err != nil { // expire in 1h
			t.Fatal(err)
		}
	}
	if !r.has(AgentKey(agentID(0))) {
		t.Fatal("a live record is not served")
	}
	r.clock.Advance(time.Hour)
	if r.has(AgentKey(agentID(0))) {
		t.Fatal("an expired record is served")
	}
	r.check()
	if st := r.s.Stats(); st.Entries != 0 || st.Expired != 40 {
		t.Fatalf("stats %+v: all 40 expired records must be gone", st)
	}
	for i := range 100 {
		if err := r.putValue(AgentKey(agentID(i)), r.signed(signers[i%4], i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	r.clock.Advance(time.Hour)
	_, other := testKey(t)
	if err := r.provide(other, 0); err != nil {
		t.Fatal(err)
	}
	if st := r.s.Stats(); st.EvictedFull != 0 || st.Entries != 1 || st.Expired != 140 {
		t.Fatalf("stats %+v: a put into a store full of expired records evicts nothing live", st)
	}
}

// Queries answer as go-datastore's MapDatastore does, prefix semantics included, whether they
// read the index (a prefix) or every entry.
func TestStoreQueryAnswersAsMapDatastore(t *testing.T) {
	ctx := context.Background()
	_, self := testKey(t)
	s := newBoundedStore(self, newFakeClock().Now, 1000, DefaultMaxStoredBytes, 1000)
	m := ds.NewMapDatastore()
	for _, k := range []string{"/providers/AB/P1", "/providers/AB/P2", "/providers/ABC/P1", "/providers/X/P3",
		"/iacp-agent/K1", "/iacp-peer/K2", "/prov", "/a/b/c/d"} {
		for _, d := range []ds.Datastore{s, m} {
			if err := d.Put(ctx, ds.NewKey(k), []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range []ds.Datastore{s, m} {
		_ = d.Delete(ctx, ds.NewKey("/providers/X/P3"))
	}
	keys := func(d ds.Datastore, q dsq.Query) []string {
		res, err := d.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		all, err := res.Rest()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range all {
			if !q.KeysOnly && string(e.Value) != e.Key {
				t.Fatalf("%s came back with value %q", e.Key, e.Value)
			}
			out = append(out, e.Key)
		}
		slices.Sort(out)
		return out
	}
	queries := []dsq.Query{{}, {Prefix: "/"}, {Prefix: "/providers/"}, {Prefix: "/providers"}, {Prefix: "providers/AB"},
		{Prefix: "/providers/AB", KeysOnly: true}, {Prefix: "/providers/X"}, {Prefix: "/prov"}, {Prefix: "/a/b"},
		{Prefix: "/iacp-agent"}, {Prefix: "/nothing"}, {Prefix: "/providers", Limit: 2, Orders: []dsq.Order{dsq.OrderByKey{}}}}
	// with a key deeper than the provider records (every query reads every entry), then
	// without (a query one level above the deepest keys reads the index).
	for _, deep := range []bool{true, false} {
		if !deep {
			for _, d := range []ds.Datastore{s, m} {
				_ = d.Delete(ctx, ds.NewKey("/a/b/c/d"))
			}
		}
		for _, q := range queries {
			if got, want := keys(s, q), keys(m, q); !slices.Equal(got, want) {
				t.Fatalf("query %+v (deep key %v): got %v, want %v", q, deep, got, want)
			}
		}
	}
}

// Random puts (new keys, rewrites of a key by another owner, records of the local node,
// records expiring at different times), deletes and clock steps keep every invariant of the
// store. The values are the fields ownerOf reads in kad-dht's envelope, unsigned: the store
// does not verify (kad-dht's value store does, before it writes).
func TestStoreInvariantsUnderRandomOperations(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 13))
	r := newStoreRig(t, 80, 100<<10, 6) // small enough that every bound is reached, see the end
	ids := make([]peer.ID, 30)
	for i := range ids {
		ids[i] = randomPeer(t, rng)
	}
	for range 5000 {
		id := ids[rng.IntN(1+rng.IntN(len(ids)))] // skewed: the first peers write the most
		if rng.IntN(6) == 0 {
			id = r.self
		}
		var key ds.Key
		var val []byte
		switch op := rng.IntN(10); {
		case op < 4:
			key = ds.NewKey(records.ProvidersKeyPrefix + providerPeerEncoding.EncodeToString(capKey(t, rng.IntN(40))) +
				"/" + providerPeerEncoding.EncodeToString([]byte(id)))
			val = []byte{1}
		case op < 8: // a value record; another signer of the same agent id takes its key over
			key = ds.NewKey(valueKeyOf(AgentKey(agentID(rng.IntN(60)))))
			expires := r.clock.Now().Add(time.Duration(1+rng.IntN(60)) * time.Minute).UnixMilli()
			val = envelope(t, fmt.Sprintf(`{"record":{"peer_id":%q,"expires_unix_ms":%d,"pad":%q}}`,
				id, expires, strings.Repeat("x", rng.IntN(3)*4<<10)))
		case op < 9:
			if err := r.s.Delete(ctx, ds.NewKey(valueKeyOf(AgentKey(agentID(rng.IntN(60)))))); err != nil {
				t.Fatal(err)
			}
		default:
			r.clock.Advance(time.Duration(rng.IntN(10)) * time.Minute)
		}
		if val != nil {
			if err := r.s.Put(ctx, key, val); err != nil && !errors.Is(err, ErrStoreFull) {
				t.Fatal(err)
			}
		}
		r.check()
	}
	st := r.s.Stats()
	if st.EvictedQuota == 0 || st.EvictedFull == 0 || st.Expired == 0 || st.LocalEntries == 0 || st.Refused == 0 {
		t.Fatalf("stats %+v: the run must reach the quota, a total, expiry and a refusal", st)
	}
}

// envelope wraps a value in kad-dht's record envelope, as its value store writes it.
func envelope(t *testing.T, value string) []byte {
	t.Helper()
	b := envelopeBytes(value)
	if b == nil {
		t.Fatal("the envelope does not encode")
	}
	return b
}

func envelopeBytes(value string) []byte {
	b, _ := proto.Marshal(&recpb.Record{Key: []byte("k"), Value: []byte(value)})
	return b
}

// valueKeyOf is the datastore key kad-dht's value store files a record key under.
func valueKeyOf(key string) string {
	return "/" + AgentNamespace + "/" + providerPeerEncoding.EncodeToString([]byte(key))
}

// The store accounts an entry at StoreEntryOverhead beyond its key and value; this measures
// the heap an entry really takes (each from its own owner, the worst case) and checks that the
// estimate covers it, so that WithMaxStoredBytes bounds memory.
func TestStoreEntryOverheadCoversMemory(t *testing.T) {
	_, self := testKey(t)
	const n = 40_000
	keys := make([]ds.Key, n)
	vals := make([][]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		keys[i] = ds.NewKey(records.ProvidersKeyPrefix + providerPeerEncoding.EncodeToString(capKey(t, i/10)) +
			"/" + providerPeerEncoding.EncodeToString([]byte(randomPeer(t, rng))))
		vals[i] = make([]byte, 9) // a varint of unix nanoseconds, as kad-dht writes
	}
	s := newBoundedStore(self, time.Now, n, 1<<40, n)
	before := heapInUse()
	for i := range n {
		if err := s.Put(context.Background(), keys[i], vals[i]); err != nil {
			t.Fatal(err)
		}
	}
	perEntry := (heapInUse() - before) / n
	if perEntry > StoreEntryOverhead {
		t.Fatalf("an entry takes %d bytes of heap beyond its key and value; StoreEntryOverhead is %d", perEntry, StoreEntryOverhead)
	}
	t.Logf("an entry takes %d bytes beyond its key and value (charged %d)", perEntry, StoreEntryOverhead)
	runtime.KeepAlive(s)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(vals)
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// randomPeer is an Ed25519 peer id from rng, without the cost of generating a key pair.
func randomPeer(t *testing.T, rng *rand.Rand) peer.ID {
	t.Helper()
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	pub, err := crypto.UnmarshalEd25519PublicKey(b)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
