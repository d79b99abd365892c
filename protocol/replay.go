package protocol

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// DefaultReplayCapacity is the default bound of a ReplayWindow: 1,048,576 ids, about 64 MiB
// at the bound (64 bytes per id across the map and the expiry heap); enough for ~290 messages
// per second sustained with one-hour TTLs.
const DefaultReplayCapacity = 1 << 20

// ReplayWindow remembers message ids until their messages expire, and refuses a repeat with
// DUPLICATE (draft "Replay Attacks").
//
// Memory is bounded by its capacity. When it is full of ids that have not yet expired, Add
// refuses new messages with RATE_LIMITED and a RetryAfter of when the oldest id expires: it
// fails closed, because forgetting an id early would let a replay through.
//
// A ReplayWindow is safe for concurrent use; its state is guarded by its own mutex. It reads
// no clock: callers pass now.
type ReplayWindow struct {
	mu       sync.Mutex
	capacity int
	ids      map[uuid.UUID]int64 // id -> expiry, unix nanoseconds
	byExpiry expiryHeap
}

// ReplayEntry is one remembered id, as Snapshot returns it and Restore takes it.
type ReplayEntry struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

// NewReplayWindow returns an empty window that holds at most capacity ids
// (DefaultReplayCapacity when capacity <= 0).
func NewReplayWindow(capacity int) *ReplayWindow {
	if capacity <= 0 {
		capacity = DefaultReplayCapacity
	}
	return &ReplayWindow{capacity: capacity, ids: make(map[uuid.UUID]int64)}
}

// Add records id until expires. It returns ErrDuplicate (wrapped in an *Error) if the id is
// already remembered and has not expired, RATE_LIMITED if the window is full, and
// PAYLOAD_INVALID if id is not a UUID. Expired ids are purged first.
func (w *ReplayWindow) Add(id string, expires, now time.Time) error {
	u, err := uuid.Parse(id)
	if err != nil {
		return Errorf(CodePayloadInvalid, "message_id %q is not a UUID", clip(id))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.purge(now.UnixNano())
	if exp, ok := w.ids[u]; ok && exp > now.UnixNano() {
		return &Error{Code: CodeDuplicate, Message: "message_id " + id + " was already processed"}
	}
	if len(w.ids) >= w.capacity {
		wait := time.Duration(w.byExpiry[0].exp - now.UnixNano())
		return &Error{Code: CodeRateLimited, Message: "replay window is full; retry later", RetryAfter: wait}
	}
	w.insert(u, expires.UnixNano())
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
	exp, ok := w.ids[u]
	return ok && exp > now.UnixNano()
}

// Remove forgets id, for a caller that recorded a message and then could not accept it.
func (w *ReplayWindow) Remove(id string) {
	u, err := uuid.Parse(id)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ids, u) // the heap entry is dropped when it expires
}

// Len returns how many ids are remembered, expired ones not yet purged included.
func (w *ReplayWindow) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
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
	for id, exp := range w.ids {
		out = append(out, ReplayEntry{ID: id.String(), Expires: time.Unix(0, exp).UTC()})
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
		w.insert(u, e.Expires.UnixNano())
	}
	return dropped
}

func (w *ReplayWindow) insert(u uuid.UUID, exp int64) {
	w.ids[u] = exp
	heap.Push(&w.byExpiry, expiryItem{id: u, exp: exp})
}

func (w *ReplayWindow) purge(now int64) {
	for len(w.byExpiry) > 0 {
		top := w.byExpiry[0]
		exp, live := w.ids[top.id]
		live = live && exp == top.exp
		if live && top.exp > now {
			break
		}
		// Expired, or left behind by Remove: either way it goes, so that the top of the heap
		// is always the live id that expires first (Add's RetryAfter relies on it).
		heap.Pop(&w.byExpiry)
		if live {
			delete(w.ids, top.id)
		}
	}
	// Entries removed with Remove leave stale heap items; compact when they dominate.
	if len(w.byExpiry) > 2*len(w.ids)+1024 {
		w.byExpiry = w.byExpiry[:0]
		for id, exp := range w.ids {
			w.byExpiry = append(w.byExpiry, expiryItem{id: id, exp: exp})
		}
		heap.Init(&w.byExpiry)
	}
}

type expiryItem struct {
	id  uuid.UUID
	exp int64
}

type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
