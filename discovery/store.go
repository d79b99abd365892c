package discovery

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	ds "github.com/ipfs/go-datastore"
	dsq "github.com/ipfs/go-datastore/query"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ErrStoreFull is returned by the DHT's local store, and so by the DHT call that wrote to it (a
// remote peer's PUT_VALUE or ADD_PROVIDER, or the local PutValue under Publish), when a record
// cannot be stored without evicting a record of the local node or the new record itself: its
// owner would hold the most in a full store. Publish returns it only when the local node's own
// records fill the store; raise WithMaxStoredRecords or WithMaxStoredBytes.
var ErrStoreFull = errors.New("the DHT record store is full")

// StoreEntryOverhead is what the store charges for an entry beyond its key and value bytes: its
// share of the maps, the prefix index, its owner and the heaps, about 390 bytes when every
// entry has its own owner (measured by TestStoreEntryOverheadCoversMemory). With it,
// WithMaxStoredBytes bounds memory, not payload.
const StoreEntryOverhead = 512

// StoreStats describes the DHT's local record store: what it holds now and what it dropped
// since New. See WithMaxStoredRecords, WithMaxStoredBytes and WithMaxStoredPerPeer.
type StoreStats struct {
	// Entries is the number of records held: agent and peer records, and provider records.
	Entries int
	// Bytes is what they are charged: key and value bytes plus StoreEntryOverhead each.
	Bytes int64
	// Owners is the number of peers that records are charged to, the local node included.
	Owners int
	// LocalEntries is the number of the local node's own records, which are never evicted.
	LocalEntries int
	// EvictedQuota counts records evicted because their owner exceeded WithMaxStoredPerPeer.
	EvictedQuota uint64
	// EvictedFull counts records evicted because the store exceeded WithMaxStoredRecords or
	// WithMaxStoredBytes.
	EvictedFull uint64
	// Refused counts puts refused with ErrStoreFull.
	Refused uint64
	// Expired counts agent and peer records dropped because the record had expired.
	Expired uint64
}

// boundedStore is the datastore the DHT keeps its records in: kad-dht's value store writes
// agent and peer records under "/iacp-agent/..." and "/iacp-peer/...", its provider manager
// writes provider records under "/providers/<key>/<provider>". It bounds the entries and the
// bytes held, and charges each entry to an owner (see ownerOf): an owner over its quota loses
// its oldest entry; a store over its totals loses the oldest entry of the owner that holds the
// most (of those that hold as much, the one that wrote last; see ownerHeap). The local node's
// entries are never evicted. Value records are dropped as soon as the record itself expires.
// All state is guarded by mu; no goroutine is started.
type boundedStore struct {
	self       peer.ID
	now        func() time.Time
	maxEntries int
	maxBytes   int64
	perOwner   int

	mu      sync.Mutex
	entries map[string]*storeEntry
	under   map[string]map[string]struct{} // parent key -> the keys just below it
	depths  []int                          // entries by depth (the number of "/" in the key)
	owners  map[peer.ID]*storeOwner
	byCount ownerHeap  // owners other than the local node, the most entries first
	byBytes ownerHeap  // the same owners, the most bytes first
	expiry  expiryHeap // value records, the first to expire first
	seq     uint64     // write counter: orders entries by age
	bytes   int64
	stats   StoreStats // the counters; Entries, Bytes, Owners and LocalEntries are computed
}

var _ ds.Batching = (*boundedStore)(nil)

func newBoundedStore(self peer.ID, now func() time.Time, maxEntries int, maxBytes int64, perOwner int) *boundedStore {
	return &boundedStore{
		self: self, now: now, maxEntries: maxEntries, maxBytes: maxBytes, perOwner: perOwner,
		entries: map[string]*storeEntry{},
		under:   map[string]map[string]struct{}{},
		owners:  map[peer.ID]*storeOwner{},
		byCount: ownerHeap{slot: 0},
		byBytes: ownerHeap{slot: 1},
	}
}

// Put stores value under key, charged to the owner ownerOf names, then enforces the owner's
// quota and the store's totals. It returns ErrStoreFull, and keeps the value it held under key
// before, when the only entries left to evict are the local node's or the new one.
func (s *boundedStore) Put(_ context.Context, key ds.Key, value []byte) error {
	k := key.String()
	id, expires := ownerOf(k, value) // parsing outside the lock
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropExpired()
	old := s.entries[k]
	if old != nil {
		s.remove(old)
	}
	s.seq++
	e := &storeEntry{key: k, value: value, size: entrySize(k, value), seq: s.seq, expires: expires, expIdx: -1}
	o := s.insert(e, id)
	if !o.local {
		for o.n > s.perOwner {
			s.remove(o.oldest()) // never e: it is the newest
			s.stats.EvictedQuota++
		}
	}
	for len(s.entries) > s.maxEntries {
		if !s.evictHeaviest(&s.byCount, e) {
			return s.refuse(e, old, "records", s.maxEntries)
		}
	}
	for s.bytes > s.maxBytes {
		if !s.evictHeaviest(&s.byBytes, e) {
			return s.refuse(e, old, "bytes", s.maxBytes)
		}
	}
	return nil
}

// evictHeaviest evicts the oldest entry of the owner at the top of h, unless that entry is
// fresh (the put in progress) or only the local node's entries are left; it reports whether an
// entry went.
func (s *boundedStore) evictHeaviest(h *ownerHeap, fresh *storeEntry) bool {
	if h.Len() == 0 {
		return false
	}
	victim := h.os[0].oldest()
	if victim == fresh {
		return false
	}
	s.remove(victim)
	s.stats.EvictedFull++
	return true
}

// refuse takes e out again and puts back old, the entry e replaced (if any): only evictions
// took place since old was removed, so it fits.
func (s *boundedStore) refuse(e, old *storeEntry, what string, limit any) error {
	s.remove(e)
	if old != nil {
		s.insert(old, old.owner.id)
	}
	s.stats.Refused++
	if e.owner.local {
		return fmt.Errorf("%w: the local node's own records reach the limit of %v %s; raise WithMaxStoredRecords or WithMaxStoredBytes", ErrStoreFull, limit, what)
	}
	return fmt.Errorf("%w (%v %s) and the record's owner %s would hold the most; it may store again once others' records expire", ErrStoreFull, limit, what, e.owner.id)
}

// Get returns the value stored under key; an expired value record is dropped and not found.
func (s *boundedStore) Get(_ context.Context, key ds.Key) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(key.String())
	if e == nil {
		return nil, ds.ErrNotFound
	}
	return e.value, nil
}

// Has reports whether a live value is stored under key.
func (s *boundedStore) Has(_ context.Context, key ds.Key) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live(key.String()) != nil, nil
}

// GetSize returns the length of the value stored under key, or -1 and ds.ErrNotFound.
func (s *boundedStore) GetSize(_ context.Context, key ds.Key) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(key.String())
	if e == nil {
		return -1, ds.ErrNotFound
	}
	return len(e.value), nil
}

// live returns the entry under k unless there is none or it expired (then it is dropped).
// s.mu must be held.
func (s *boundedStore) live(k string) *storeEntry {
	e := s.entries[k]
	if e != nil && e.expires != 0 && e.expires <= s.now().UnixMilli() {
		s.remove(e)
		s.stats.Expired++
		return nil
	}
	return e
}

// Delete removes the entry under key, if any.
func (s *boundedStore) Delete(_ context.Context, key ds.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[key.String()]; e != nil {
		s.remove(e)
	}
	return nil
}

// Query answers from a snapshot taken under the lock (the caller may Put and Delete while it
// iterates). A query for the keys just below a prefix (no key lies deeper) reads the index of
// that prefix's children, not every entry: the provider manager asks for one key's providers,
// "/providers/<key>", on every GET_PROVIDERS. Other prefixes (kad-dht's hourly and daily
// sweeps of "/providers/" and of each namespace) read every entry.
func (s *boundedStore) Query(_ context.Context, q dsq.Query) (dsq.Results, error) {
	s.mu.Lock()
	s.dropExpired()
	var es []dsq.Entry
	add := func(e *storeEntry) {
		en := dsq.Entry{Key: e.key, Size: len(e.value)}
		if !q.KeysOnly {
			en.Value = e.value
		}
		es = append(es, en)
	}
	if p := cleanPrefix(q.Prefix); p != "/" && !s.deeperThan(strings.Count(p, "/")+1) {
		for k := range s.under[p] {
			add(s.entries[k])
		}
	} else {
		es = make([]dsq.Entry, 0, len(s.entries))
		for _, e := range s.entries {
			add(e)
		}
	}
	s.mu.Unlock()
	// The prefix is applied again (a no-op), with filters, orders, offset and limit.
	return dsq.NaiveQueryApply(q, dsq.ResultsWithEntries(q, es)), nil
}

// deeperThan reports whether some key has more than depth segments. s.mu must be held.
func (s *boundedStore) deeperThan(depth int) bool {
	for d := depth + 1; d < len(s.depths); d++ {
		if s.depths[d] > 0 {
			return true
		}
	}
	return false
}

// cleanPrefix is the prefix as go-datastore's NaiveQueryApply reads it: "/bar/" and "bar" are
// "/bar" and select the keys strictly below it.
func cleanPrefix(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	return path.Clean(p)
}

// Sync does nothing: the store is in memory.
func (s *boundedStore) Sync(context.Context, ds.Key) error { return nil }

// Batch returns a batch that applies its puts and deletes one by one on Commit.
func (s *boundedStore) Batch(context.Context) (ds.Batch, error) { return ds.NewBasicBatch(s), nil }

// Close does nothing: the store holds no resource but memory, and the DHT may still read it
// while its handlers wind down.
func (s *boundedStore) Close() error { return nil }

// Stats returns a snapshot of the store's contents and counters.
func (s *boundedStore) Stats() StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropExpired()
	st := s.stats
	st.Entries, st.Bytes, st.Owners = len(s.entries), s.bytes, len(s.owners)
	if o := s.owners[s.self]; o != nil {
		st.LocalEntries = o.n
	}
	return st
}

// dropExpired removes every value record whose record has expired. s.mu must be held.
func (s *boundedStore) dropExpired() {
	if len(s.expiry) == 0 {
		return
	}
	now := s.now().UnixMilli()
	for len(s.expiry) > 0 && s.expiry[0].expires <= now {
		s.remove(s.expiry[0])
		s.stats.Expired++
	}
}

// noProviderCache is the cache kad-dht's provider manager is given (records.Cache): it holds
// nothing, so the bounded store is the only copy of the provider records. kad-dht's default
// cache keeps, for each of 256 keys, a provider set that every ADD_PROVIDER of that key extends,
// outside the store's bounds and out of reach of its evictions. Without it, each GET_PROVIDERS
// reads the key's providers from the store's prefix index.
type noProviderCache struct{}

func (noProviderCache) Add(_, _ any) bool              { return false }
func (noProviderCache) Get(any) (any, bool)            { return nil, false }
func (noProviderCache) Contains(any) bool              { return false }
func (noProviderCache) Peek(any) (any, bool)           { return nil, false }
func (noProviderCache) Remove(any) bool                { return false }
func (noProviderCache) RemoveOldest() (any, any, bool) { return nil, nil, false }
func (noProviderCache) GetOldest() (any, any, bool)    { return nil, nil, false }
func (noProviderCache) Keys() []any                    { return nil }
func (noProviderCache) Len() int                       { return 0 }
func (noProviderCache) Purge()                         {}
func (noProviderCache) Resize(int) int                 { return 0 }
