package discovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p-kad-dht/records"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	ma "github.com/multiformats/go-multiaddr"
)

// storeRig is a boundedStore driven the way the DHT drives it: agent and peer records through
// kad-dht's ValueStore (which runs our Validator first), provider records through its
// ProviderManager with the empty cache New gives it.
type storeRig struct {
	t       *testing.T
	clock   *fakeClock
	selfKey crypto.PrivKey
	self    peer.ID
	s       *boundedStore
	vs      *records.ValueStore
	pm      *records.ProviderManager
}

func newStoreRig(t *testing.T, maxEntries int, maxBytes int64, perPeer int) *storeRig {
	t.Helper()
	r := &storeRig{t: t, clock: newFakeClock()}
	r.selfKey, r.self = testKey(t)
	r.s = newBoundedStore(r.self, r.clock.Now, maxEntries, maxBytes, perPeer)
	r.vs = records.NewValueStore(r.s, record.NamespacedValidator{
		AgentNamespace: Validator{Namespace: AgentNamespace, Now: r.clock.Now},
		PeerNamespace:  Validator{Namespace: PeerNamespace, Now: r.clock.Now},
	}, MaxRecordLifetime)
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		t.Fatal(err)
	}
	r.pm, err = records.NewProviderManager(r.self, ps, r.s, records.Cache(noProviderCache{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.pm.Close()
		_ = ps.Close()
	})
	return r
}

// signed returns agent i's record signed by sk, expiring in an hour, its manifest padded with
// pad bytes.
func (r *storeRig) signed(sk crypto.PrivKey, i int, pad int) []byte {
	r.t.Helper()
	id, _ := peer.IDFromPrivateKey(sk)
	m := manifestFor(i)
	if pad > 0 {
		m.Tools = append(m.Tools, strings.Repeat("x", pad))
	}
	return mustSign(r.t, Record{
		AgentID: agentID(i), PeerID: id, Seq: uint64(r.clock.Now().UnixNano()),
		Expires: r.clock.Now().Add(time.Hour), Addrs: []ma.Multiaddr{ma.StringCast("/ip4/10.0.0.1/tcp/4001")},
		Manifest: m,
	}, sk)
}

// putValue stores a signed record under key as a PUT_VALUE would.
func (r *storeRig) putValue(key string, val []byte) error {
	return r.vs.Put(context.Background(), key, record.MakePutRecord(key, val))
}

// publish stores agent i's record, signed by sk, under its agent key and its peer key.
func (r *storeRig) publish(sk crypto.PrivKey, i int, pad int) {
	r.t.Helper()
	val := r.signed(sk, i, pad)
	id, _ := peer.IDFromPrivateKey(sk)
	for _, key := range []string{AgentKey(agentID(i)), PeerKey(id)} {
		if err := r.putValue(key, val); err != nil {
			r.t.Fatalf("put %s: %v", key, err)
		}
	}
}

// capKey is the provider key of tool "tool<n>", as Provide passes it (the multihash).
func capKey(t *testing.T, n int) []byte {
	t.Helper()
	c, err := CapabilityCID(KindTool, fmt.Sprintf("tool%d", n))
	if err != nil {
		t.Fatal(err)
	}
	return c.Hash()
}

// provide adds p as a provider of tool<n>, as an ADD_PROVIDER from p would.
func (r *storeRig) provide(p peer.ID, n int) error {
	return r.pm.AddProvider(context.Background(), capKey(r.t, n), peer.AddrInfo{ID: p})
}

// providers returns the providers the DHT would answer for tool<n>.
func (r *storeRig) providers(n int) map[peer.ID]bool {
	r.t.Helper()
	ais, err := r.pm.GetProviders(context.Background(), capKey(r.t, n))
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[peer.ID]bool{}
	for _, ai := range ais {
		out[ai.ID] = true
	}
	return out
}

// has reports whether a value is served under key.
func (r *storeRig) has(key string) bool {
	r.t.Helper()
	rec, err := r.vs.Get(context.Background(), key)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec != nil
}

// held is the number of entries charged to p.
func (r *storeRig) held(p peer.ID) int {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if o := r.s.owners[p]; o != nil {
		return o.n
	}
	return 0
}

// check verifies the store's invariants: the totals within their bounds, every entry charged
// once, the owners' sums, the heaps' order and positions, the prefix index.
func (r *storeRig) check() {
	r.t.Helper()
	if err := r.s.checkInvariants(); err != nil {
		r.t.Fatal(err)
	}
}

func (s *boundedStore) checkInvariants() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) > s.maxEntries || s.bytes > s.maxBytes {
		return fmt.Errorf("store holds %d entries, %d bytes: over %d, %d", len(s.entries), s.bytes, s.maxEntries, s.maxBytes)
	}
	var n int
	var bytes int64
	for id, o := range s.owners {
		var ob int64
		var last uint64
		held := 0
		for e := o.oldest(); e != nil; e = e.next {
			if s.entries[e.key] != e || e.owner != o || e.seq <= last || (e.next != nil && e.next.prev != e) {
				return fmt.Errorf("owner %s: entry %s misfiled or out of order", id, e.key)
			}
			last = e.seq
			ob += e.size
			held++
		}
		n += held
		if ob != o.bytes || held != o.n || held == 0 || o.newest().seq != last {
			return fmt.Errorf("owner %s: %d bytes counted, %d held; %d entries counted, %d held", id, o.bytes, ob, o.n, held)
		}
		if !o.local && o.n > s.perOwner {
			return fmt.Errorf("owner %s holds %d, over the quota %d", id, o.n, s.perOwner)
		}
		for _, h := range []*ownerHeap{&s.byCount, &s.byBytes} {
			if in := !o.local; in != (o.idx[h.slot] < len(h.os) && h.os[o.idx[h.slot]] == o) {
				return fmt.Errorf("owner %s: heap %d position wrong", id, h.slot)
			}
		}
		bytes += ob
	}
	if n != len(s.entries) || bytes != s.bytes {
		return fmt.Errorf("owners hold %d entries, %d bytes; the store counts %d, %d", n, bytes, len(s.entries), s.bytes)
	}
	for _, h := range []*ownerHeap{&s.byCount, &s.byBytes} {
		for i := 1; i < h.Len(); i++ {
			if h.Less(i, (i-1)/2) {
				return fmt.Errorf("heap %d out of order at %d", h.slot, i)
			}
		}
	}
	for i, e := range s.expiry {
		if e.expIdx != i || s.entries[e.key] != e {
			return fmt.Errorf("expiry heap position wrong for %s", e.key)
		}
	}
	indexed, depths := 0, make([]int, len(s.depths))
	for parent, set := range s.under {
		for k := range set {
			if p, _ := parentOf(k); s.entries[k] == nil || p != parent {
				return fmt.Errorf("index %s lists %s", parent, k)
			}
			indexed++
		}
	}
	for k := range s.entries {
		_, d := parentOf(k)
		depths[d]++
	}
	if indexed != len(s.entries) || !slices.Equal(depths, s.depths) {
		return fmt.Errorf("index holds %d keys of %d; depths %v, counted %v", indexed, len(s.entries), s.depths, depths)
	}
	return nil
}
