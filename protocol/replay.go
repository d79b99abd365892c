package protocol

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// DefaultReplayCapacity is the default bound of a ReplayWindow: 524,288 ids, about 76 MiB at
// the bound (153 bytes per id across the map, the expiry heap and its owner's heap, measured);
// enough for ~145 messages per second sustained with one-hour TTLs. A full window refuses only the peer that
// holds the most of it (see ReplayWindow), so the bound costs honest peers little.
const DefaultReplayCapacity = 1 << 19

// ReplayWindow remembers message ids until their messages expire, and refuses a repeat with
// DUPLICATE (draft "Replay Attacks").
//
// Every id is charged to an owner: the authenticated peer that delivered it (the sender of a
// direct message, the relaying peer of a gossip message). Memory is bounded by the capacity,
// and a full window is paid for by whoever filled it: when a new id does not fit, its owner
// is refused with RATE_LIMITED (and a RetryAfter of when its own oldest id expires) if it
// holds at least as many ids as any other owner; otherwise a live id of the owner holding the
// most is forgotten to make room. One peer flooding the window therefore ends up refused
// itself, and never locks everyone else out. Forgetting an id early lets that one message be
// accepted again; for a direct message only its own sender can send it again (the signature
// names the sender's peer, and the node checks it is the peer on the stream), and a node with
// durable delivery still recognises it in its store.
//
// A ReplayWindow is safe for concurrent use; its state is guarded by its own mutex. It reads
// no clock: callers pass now.
type ReplayWindow struct {
	mu       sync.Mutex
	capacity int
	ids      map[uuid.UUID]replayID
	byExpiry expiryHeap // every id, live or not, earliest expiry first; stale items are skipped
	owners   map[string]*replayOwner
	// byCount indexes the owners by how many ids they hold, and top is the largest count, so
	// that a full window finds its largest owner in constant time however many owners (peer
	// identities, which cost an attacker nothing) it holds. Counts move by one at a time.
	byCount map[int]map[*replayOwner]struct{}
	top     int
	// spare keeps a few emptied sets of byCount for reuse: an owner whose count moves up by
	// one usually finds its new level empty, and would otherwise cost a map per id.
	spare   []map[*replayOwner]struct{}
	evicted uint64
}

type replayID struct {
	exp   int64 // unix nanoseconds
	owner *replayOwner
}

// replayOwner counts the live ids charged to one owner and keeps them by expiry, so that the
// owner's oldest id is found, and one of its ids forgotten, in logarithmic time. Its heap
// keeps items of ids already forgotten until they reach its top (or a compaction).
type replayOwner struct {
	name  string
	count int
	heap  expiryHeap
}

// ReplayEntry is one remembered id, as Snapshot returns it and Restore takes it.
type ReplayEntry struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
	// Owner is the peer the id is charged to ("" when unknown, as in windows saved before
	// owners were recorded).
	Owner string `json:"owner,omitempty"`
}

// NewReplayWindow returns an empty window that holds at most capacity ids
// (DefaultReplayCapacity when capacity <= 0).
func NewReplayWindow(capacity int) *ReplayWindow {
	if capacity <= 0 {
		capacity = DefaultReplayCapacity
	}
	return &ReplayWindow{
		capacity: capacity,
		ids:      make(map[uuid.UUID]replayID),
		owners:   make(map[string]*replayOwner),
		byCount:  make(map[int]map[*replayOwner]struct{}),
		spare:    make([]map[*replayOwner]struct{}, 0, 8),
	}
}

// Add records id until expires, charged to owner. It returns ErrDuplicate (wrapped in an
// *Error) if the id is already remembered and has not expired, PAYLOAD_INVALID if id is not a
// UUID, and RATE_LIMITED when the window is full and owner holds the most ids (see
// ReplayWindow). Expired ids are purged first.
func (w *ReplayWindow) Add(id, owner string, expires, now time.Time) error {
	u, err := uuid.Parse(id)
	if err != nil {
		return Errorf(CodePayloadInvalid, "message_id %q is not a UUID", clip(id))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	nowNs := now.UnixNano()
	w.purge(nowNs)
	if e, ok := w.ids[u]; ok && e.exp > nowNs {
		return &Error{Code: CodeDuplicate, Message: "message_id " + id + " was already processed"}
	}
	o := w.owners[owner]
	if len(w.ids) >= w.capacity {
		largest := w.largest()
		if o != nil && o.count >= largest.count {
			return &Error{Code: CodeRateLimited, RetryAfter: time.Duration(w.oldestOf(o) - nowNs),
				Message: "replay window is full and this peer holds the most of it; retry later"}
		}
		w.evictOne(largest)
	}
	w.insert(u, owner, expires.UnixNano())
	return nil
}

// Seen reports whether id is remembered and not expired at now.
func (w *ReplayWindow) Seen(id string, now time.Time) bool {
	u, err := uuid.Parse(id)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.ids[u]
	return ok && e.exp > now.UnixNano()
}

// Remove forgets id, for a caller that recorded a message and then could not accept it.
func (w *ReplayWindow) Remove(id string) {
	u, err := uuid.Parse(id)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.ids[u]; ok {
		w.forget(u, e) // the heap item is dropped when it reaches the top
	}
}

// Len returns how many ids are remembered, expired ones not yet purged included.
func (w *ReplayWindow) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

// OwnerLen returns how many remembered ids are charged to owner.
func (w *ReplayWindow) OwnerLen(owner string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if o := w.owners[owner]; o != nil {
		return o.count
	}
	return 0
}

// Evicted returns how many live ids were forgotten early to make room for another owner's.
func (w *ReplayWindow) Evicted() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evicted
}

// Capacity returns the bound.
func (w *ReplayWindow) Capacity() int { return w.capacity }

// Snapshot returns every id that has not expired at now, oldest expiry first, so that a
// caller can persist the window.
func (w *ReplayWindow) Snapshot(now time.Time) []ReplayEntry {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.purge(now.UnixNano())
	out := make([]ReplayEntry, 0, len(w.ids))
	for id, e := range w.ids {
		out = append(out, ReplayEntry{ID: id.String(), Expires: time.Unix(0, e.exp).UTC(), Owner: e.owner.name})
	}
	slices.SortFunc(out, func(a, b ReplayEntry) int { return a.Expires.Compare(b.Expires) })
	return out
}

// Restore adds entries that have not expired at now, up to the capacity; entries beyond it
// are the ones expiring last and are dropped, and their count is returned.
func (w *ReplayWindow) Restore(entries []ReplayEntry, now time.Time) (dropped int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range entries {
		u, err := uuid.Parse(e.ID)
		if err != nil || !e.Expires.After(now) {
			continue
		}
		if _, ok := w.ids[u]; ok {
			continue
		}
		if len(w.ids) >= w.capacity {
			dropped++
			continue
		}
		w.insert(u, e.Owner, e.Expires.UnixNano())
	}
	return dropped
}

func (w *ReplayWindow) insert(u uuid.UUID, owner string, exp int64) {
	o := w.owners[owner]
	if o == nil {
		o = &replayOwner{name: owner}
		w.owners[owner] = o
	}
	w.recount(o, +1)
	w.ids[u] = replayID{exp: exp, owner: o}
	it := expiryItem{id: u, exp: exp, owner: o}
	w.byExpiry.push(it)
	o.heap.push(it)
	if len(o.heap) > 2*o.count+64 {
		w.compact(o) // ids purged from the window leave items here: an active owner's heap would grow
	}
}

// forget drops a live id from the map and its owner's count; its heap item becomes stale.
func (w *ReplayWindow) forget(u uuid.UUID, e replayID) {
	delete(w.ids, u)
	if w.recount(e.owner, -1); e.owner.count == 0 {
		delete(w.owners, e.owner.name)
	}
}

// recount moves o's count by delta (+1 or -1) and keeps byCount and top in step.
func (w *ReplayWindow) recount(o *replayOwner, delta int) {
	if set := w.byCount[o.count]; set != nil {
		if delete(set, o); len(set) == 0 {
			delete(w.byCount, o.count)
			if len(w.spare) < cap(w.spare) {
				w.spare = append(w.spare, set)
			}
			if o.count == w.top && delta < 0 {
				w.top--
			}
		}
	}
	o.count += delta
	if o.count == 0 {
		return
	}
	set := w.byCount[o.count]
	if set == nil {
		if k := len(w.spare); k > 0 {
			set, w.spare = w.spare[k-1], w.spare[:k-1]
		} else {
			set = make(map[*replayOwner]struct{})
		}
		w.byCount[o.count] = set
	}
	set[o] = struct{}{}
	w.top = max(w.top, o.count)
}

// live reports whether a heap item still stands for its id (not removed, evicted or
// re-added since).
func (w *ReplayWindow) live(it expiryItem) bool {
	e, ok := w.ids[it.id]
	return ok && e.exp == it.exp && e.owner == it.owner
}

func (w *ReplayWindow) purge(now int64) {
	for len(w.byExpiry) > 0 {
		top := w.byExpiry[0]
		live := w.live(top)
		if live && top.exp > now {
			break
		}
		// Expired, or left behind by Remove or an eviction: either way it goes.
		w.byExpiry.pop()
		if live {
			w.forget(top.id, w.ids[top.id])
		}
	}
	// Removed and evicted ids leave stale heap items; compact when they dominate.
	if len(w.byExpiry) > 2*len(w.ids)+1024 {
		w.byExpiry = w.byExpiry[:0]
		for id, e := range w.ids {
			w.byExpiry = append(w.byExpiry, expiryItem{id: id, exp: e.exp, owner: e.owner})
		}
		heap.Init(&w.byExpiry)
	}
}

// largest returns an owner charged with the most ids (any of equals); the caller holds mu
// and the window is not empty.
func (w *ReplayWindow) largest() *replayOwner {
	for o := range w.byCount[w.top] {
		return o
	}
	panic("protocol: replay window has ids but no owner holds any")
}

// oldestOf returns the earliest expiry among o's live ids (o holds at least one).
func (w *ReplayWindow) oldestOf(o *replayOwner) int64 {
	w.dropStale(o)
	return o.heap[0].exp
}

// evictOne forgets o's live id that expires first (o holds at least one); its item in the
// window's heap is left to purge.
func (w *ReplayWindow) evictOne(o *replayOwner) {
	w.dropStale(o)
	it := o.heap.pop()
	w.forget(it.id, w.ids[it.id])
	w.evicted++
}

// dropStale pops the items of forgotten ids off the top of o's heap.
func (w *ReplayWindow) dropStale(o *replayOwner) {
	for len(o.heap) > 0 && !w.live(o.heap[0]) {
		o.heap.pop()
	}
}

// compact keeps only the items of o's live ids.
func (w *ReplayWindow) compact(o *replayOwner) {
	live := o.heap[:0]
	for _, it := range o.heap {
		if w.live(it) {
			live = append(live, it)
		}
	}
	clear(o.heap[len(live):])
	o.heap = live
	heap.Init(&o.heap)
}

type expiryItem struct {
	id    uuid.UUID
	exp   int64
	owner *replayOwner
}

type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }

// push and pop are heap.Push and heap.Pop without boxing the item in an interface, which
// would cost an allocation per call (every id a node receives is pushed twice).
func (h *expiryHeap) push(it expiryItem) {
	*h = append(*h, it)
	s := *h
	for j := len(s) - 1; j > 0; {
		i := (j - 1) / 2
		if !s.Less(j, i) {
			break
		}
		s.Swap(i, j)
		j = i
	}
}

func (h *expiryHeap) pop() expiryItem {
	s := *h
	n := len(s) - 1
	s.Swap(0, n)
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && s.Less(r, j) {
			j = r
		}
		if !s.Less(j, i) {
			break
		}
		s.Swap(i, j)
		i = j
	}
	it := s[n]
	s[n] = expiryItem{}
	*h = s[:n]
	return it
}
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
