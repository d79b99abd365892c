package discovery

import (
	"container/heap"
	"encoding/base32"
	"encoding/json"
	"strings"

	"github.com/libp2p/go-libp2p-kad-dht/records"
	recpb "github.com/libp2p/go-libp2p-record/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"
)

// storeEntry is one datastore entry of a boundedStore.
type storeEntry struct {
	key        string
	value      []byte
	size       int64  // charged: entrySize
	seq        uint64 // write order: a lower seq is older
	owner      *storeOwner
	prev, next *storeEntry // the owner's entries, oldest write first
	expires    int64       // a value record's expiry in unix ms; 0 for provider records (kad-dht's GC)
	expIdx     int         // position in the expiry heap, -1 when not in it
}

// storeOwner is the peer a set of entries is charged to.
type storeOwner struct {
	id         peer.ID
	local      bool        // the local node: no quota, never evicted, in no heap
	head, tail *storeEntry // oldest and newest write
	n          int
	bytes      int64
	idx        [2]int // positions in byCount and byBytes
}

func (o *storeOwner) oldest() *storeEntry { return o.head }

func (o *storeOwner) newest() *storeEntry { return o.tail }

// link puts e in write order: at the end, unless it is an older entry put back (refuse).
func (o *storeOwner) link(e *storeEntry) {
	after := o.tail
	for after != nil && after.seq > e.seq {
		after = after.prev
	}
	e.prev = after
	if after != nil {
		e.next, after.next = after.next, e
	} else {
		e.next, o.head = o.head, e
	}
	if e.next != nil {
		e.next.prev = e
	} else {
		o.tail = e
	}
	o.n++
}

func (o *storeOwner) unlink(e *storeEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		o.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		o.tail = e.prev
	}
	e.prev, e.next = nil, nil
	o.n--
}

func entrySize(key string, value []byte) int64 {
	return int64(len(key)+len(value)) + StoreEntryOverhead
}

// providerPeerEncoding is how kad-dht's provider manager writes the provider's peer id in the
// last segment of a provider record's key (go-base32's RawStdEncoding).
var providerPeerEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// ownerOf names the peer an entry is charged to, and a value record's expiry:
//   - a provider record ("/providers/<key>/<provider>") is charged to the provider: kad-dht
//     accepts an ADD_PROVIDER only from the provider itself;
//   - a value record (kad-dht's record envelope around our signed record) is charged to the
//     peer that signed it, read from its peer_id without verifying the signature again: the
//     DHT's value store ran the Validator before it wrote the entry. A record relayed by
//     another peer (kad-dht's fix-up puts) is still charged to its signer.
//
// Anything else is charged to the empty peer id, an owner with a quota like any other.
func ownerOf(key string, value []byte) (owner peer.ID, expiresUnixMilli int64) {
	if rest, ok := strings.CutPrefix(key, records.ProvidersKeyPrefix); ok {
		raw, err := providerPeerEncoding.DecodeString(rest[strings.LastIndexByte(rest, '/')+1:])
		if err != nil {
			return "", 0
		}
		id, err := peer.IDFromBytes(raw)
		if err != nil {
			return "", 0
		}
		return id, 0
	}
	var env recpb.Record
	if proto.Unmarshal(value, &env) != nil {
		return "", 0
	}
	var sr struct {
		Record struct {
			PeerID  string `json:"peer_id"`
			Expires int64  `json:"expires_unix_ms"`
		} `json:"record"`
	}
	if json.Unmarshal(env.GetValue(), &sr) != nil {
		return "", 0
	}
	signer, err := peer.Decode(sr.Record.PeerID)
	if err != nil {
		return "", 0
	}
	return signer, max(sr.Record.Expires, 0)
}

// insert adds e, charged to id, and returns its owner. s.mu must be held.
func (s *boundedStore) insert(e *storeEntry, id peer.ID) *storeOwner {
	o, known := s.owners[id]
	if !known {
		o = &storeOwner{id: id, local: id == s.self}
		s.owners[id] = o
	}
	e.owner = o
	o.link(e)
	o.bytes += e.size
	s.bytes += e.size
	s.entries[e.key] = e
	parent, depth := parentOf(e.key)
	set := s.under[parent]
	if set == nil {
		set = map[string]struct{}{}
		s.under[parent] = set
	}
	set[e.key] = struct{}{}
	for len(s.depths) <= depth {
		s.depths = append(s.depths, 0)
	}
	s.depths[depth]++
	if e.expires != 0 {
		heap.Push(&s.expiry, e)
	}
	switch {
	case o.local:
	case known:
		s.fix(o)
	default: // the heaps compare owners by their newest entry: push once it has one
		heap.Push(&s.byCount, o)
		heap.Push(&s.byBytes, o)
	}
	return o
}

// remove drops e and uncharges its owner. s.mu must be held.
func (s *boundedStore) remove(e *storeEntry) {
	o := e.owner
	o.unlink(e)
	o.bytes -= e.size
	s.bytes -= e.size
	delete(s.entries, e.key)
	parent, depth := parentOf(e.key)
	delete(s.under[parent], e.key)
	if len(s.under[parent]) == 0 {
		delete(s.under, parent)
	}
	s.depths[depth]--
	if e.expIdx >= 0 {
		heap.Remove(&s.expiry, e.expIdx)
	}
	if o.n > 0 {
		s.fix(o)
		return
	}
	delete(s.owners, o.id)
	if !o.local {
		heap.Remove(&s.byCount, o.idx[0])
		heap.Remove(&s.byBytes, o.idx[1])
	}
}

// fix restores the heaps' order after o's entries changed. s.mu must be held.
func (s *boundedStore) fix(o *storeOwner) {
	if !o.local {
		heap.Fix(&s.byCount, o.idx[0])
		heap.Fix(&s.byBytes, o.idx[1])
	}
}

// parentOf returns a clean datastore key's parent and its depth: "/a/b" and 3 for "/a/b/c".
func parentOf(key string) (string, int) {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return "/", strings.Count(key, "/")
	}
	return key[:i], strings.Count(key, "/")
}

// ownerHeap orders owners by what they hold, the most first (entries in slot 0, bytes in slot
// 1); among equals, the one that wrote last comes first. A flood writes all the time and an
// honest peer once per republish, so among owners that hold as much, the one writing now is
// most likely the flood; preferring the oldest writes instead would take the honest records,
// written before the flood began.
type ownerHeap struct {
	slot int
	os   []*storeOwner
}

func (h *ownerHeap) weight(o *storeOwner) int64 {
	if h.slot == 0 {
		return int64(o.n)
	}
	return o.bytes
}

func (h *ownerHeap) Len() int { return len(h.os) }

func (h *ownerHeap) Less(i, j int) bool {
	a, b := h.os[i], h.os[j]
	if wa, wb := h.weight(a), h.weight(b); wa != wb {
		return wa > wb
	}
	return a.newest().seq > b.newest().seq
}

func (h *ownerHeap) Swap(i, j int) {
	h.os[i], h.os[j] = h.os[j], h.os[i]
	h.os[i].idx[h.slot], h.os[j].idx[h.slot] = i, j
}

func (h *ownerHeap) Push(x any) {
	o := x.(*storeOwner)
	o.idx[h.slot] = len(h.os)
	h.os = append(h.os, o)
}

func (h *ownerHeap) Pop() any {
	o := h.os[len(h.os)-1]
	h.os[len(h.os)-1] = nil
	h.os = h.os[:len(h.os)-1]
	o.idx[h.slot] = -1
	return o
}

// expiryHeap orders value records by expiry, the first to expire first.
type expiryHeap []*storeEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires < h[j].expires }

func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].expIdx, h[j].expIdx = i, j
}

func (h *expiryHeap) Push(x any) {
	e := x.(*storeEntry)
	e.expIdx = len(*h)
	*h = append(*h, e)
}

func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.expIdx = -1
	return e
}
