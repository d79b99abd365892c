package store

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// Problem is one thing wrong in a store file, as Check and Recover report it.
type Problem struct {
	// Bucket is the bucket the damage is in; "" for the file's own structure (meta pages,
	// the bucket directory).
	Bucket string
	// Key is the record's key (as text when it is printable, else in hex); "" when the
	// problem is not about one record.
	Key string
	// Page is the page the damage was found on; 0 when it is not about one page.
	Page uint64
	// What says what is wrong.
	What string
}

func (p Problem) String() string {
	var b bytes.Buffer
	if p.Bucket != "" {
		fmt.Fprintf(&b, "bucket %s: ", p.Bucket)
	}
	if p.Key != "" {
		fmt.Fprintf(&b, "key %s: ", p.Key)
	}
	if p.Page != 0 {
		fmt.Fprintf(&b, "page %d: ", p.Page)
	}
	b.WriteString(p.What)
	return b.String()
}

// printableKey shows a key as text when it is printable UTF-8, else in hex.
func printableKey(k []byte) string {
	if utf8.Valid(k) && bytes.IndexFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0 {
		return string(k)
	}
	return hex.EncodeToString(k)
}

// walker reads the bucket trees of a bbolt file from its bytes, skipping what it cannot read
// and noting why: a damaged page costs the records under it, never the walk.
type walker struct {
	data     []byte
	pageSize int
	hwm      uint64
	visited  map[uint64]bool // pages reached, overflow pages included
	problems []Problem
	damaged  map[string]bool // buckets with a damaged page
	reached  map[string]bool // buckets whose root the walk reached
	// visit is called for every key and value of a bucket that is not itself a bucket. The
	// slices point into the file's bytes.
	visit func(bucket string, key, value []byte)
}

func newWalker(data []byte, pageSize int, hwm uint64, visit func(bucket string, key, value []byte)) *walker {
	return &walker{data: data, pageSize: pageSize, hwm: hwm, visited: make(map[uint64]bool),
		damaged: make(map[string]bool), reached: make(map[string]bool), visit: visit}
}

func (w *walker) problem(bucket string, pg uint64, format string, args ...any) {
	w.problems = append(w.problems, Problem{Bucket: bucket, Page: pg, What: fmt.Sprintf(format, args...)})
	w.damaged[bucket] = true
}

// whole reports whether the walk read bucket from its root without meeting damage.
func (w *walker) whole(bucket string) bool { return w.reached[bucket] && !w.damaged[bucket] }

// file walks everything a meta page reaches: the freelist page, if stored, and the root
// bucket with every bucket under it.
func (w *walker) file(m boltMeta) {
	if need := m.hwm * uint64(w.pageSize); need > uint64(len(w.data)) || need/uint64(w.pageSize) != m.hwm {
		w.problem("", 0, "the file is %d bytes, shorter than the %d pages its meta page names (truncated?)", len(w.data), m.hwm)
		return
	}
	if m.freelist != noFreelist {
		if p, err := w.page("", m.freelist); err == nil && p.flags != flagFreelist {
			w.problem("", m.freelist, "the freelist page has flags %#x", p.flags)
		}
	}
	w.tree("", m.root, 0, nil, nil)
}

// page reads page id, checks its header and marks it (and its overflow) visited.
func (w *walker) page(bucket string, id uint64) (page, error) {
	fail := func(format string, args ...any) (page, error) {
		w.problem(bucket, id, format, args...)
		return page{}, fmt.Errorf(format, args...)
	}
	if id < 2 || id >= w.hwm {
		return fail("a page id out of range: the file has %d pages", w.hwm)
	}
	if w.visited[id] {
		return fail("page reached twice: the tree has a cycle or a shared page")
	}
	w.visited[id] = true
	p, err := pageAt(w.data, w.pageSize, id)
	switch {
	case err != nil:
		return fail("%v", err)
	case p.id != id:
		return fail("the page's header names page %d: a scribbled or misplaced page", p.id)
	case id+uint64(p.overflow) >= w.hwm:
		return fail("%d overflow pages run past the file's %d pages", p.overflow, w.hwm)
	}
	for i := uint64(1); i <= uint64(p.overflow); i++ {
		if w.visited[id+i] {
			return fail("overflow page %d reached twice", id+i)
		}
		w.visited[id+i] = true
	}
	return p, nil
}

// tree walks the subtree rooted at page id of bucket, whose keys must lie in [lo, hi).
func (w *walker) tree(bucket string, id uint64, depth int, lo, hi []byte) {
	if depth > maxTreeDepth {
		w.problem(bucket, id, "the tree is more than %d levels deep: a cycle", maxTreeDepth)
		return
	}
	p, err := w.page(bucket, id)
	if err != nil {
		return
	}
	if p.flags != flagBranch && p.flags != flagLeaf {
		w.problem(bucket, id, "flags %#x: neither a branch nor a leaf page", p.flags)
		return
	}
	w.elems(bucket, p, depth, lo, hi)
}

// elems walks the elements of a branch or leaf page (stored or inline).
func (w *walker) elems(bucket string, p page, depth int, lo, hi []byte) {
	es, err := p.elems()
	if err != nil {
		w.problem(bucket, p.id, "%v", err)
		return
	}
	if p.flags == flagBranch && len(es) == 0 {
		w.problem(bucket, p.id, "a branch page with no elements")
		return
	}
	if len(es) > 0 && ((lo != nil && bytes.Compare(es[0].key, lo) < 0) || (hi != nil && bytes.Compare(es[len(es)-1].key, hi) >= 0)) {
		w.problem(bucket, p.id, "keys outside the range its parent gives it")
		return
	}
	for i, e := range es {
		switch {
		case p.flags == flagBranch:
			var next []byte = hi
			if i+1 < len(es) {
				next = es[i+1].key
			}
			w.tree(bucket, e.child, depth+1, e.key, next)
		case e.bucket && bucket != "":
			// The store nests no buckets; following one would let a damaged page whose
			// elements overlap fan out without bound.
			w.problem(bucket, p.id, "a bucket nested in a bucket, which the store never writes")
		case e.bucket:
			w.bucket(joinBucket(bucket, e.key), e.value, depth)
		default:
			w.visit(bucket, e.key, e.value)
		}
	}
}

// bucket walks a nested bucket from its value in the parent: a root page id, or 0 and the
// bucket's only page inline.
func (w *walker) bucket(name string, v []byte, depth int) {
	w.reached[name] = true
	if len(v) < bucketHdrSize {
		w.problem(name, 0, "the bucket's header is %d bytes, not %d", len(v), bucketHdrSize)
		return
	}
	if root := ne.Uint64(v); root != 0 {
		w.tree(name, root, depth+1, nil, nil)
		return
	}
	p, err := inlinePage(v)
	if err != nil {
		w.problem(name, 0, "%v", err)
		return
	}
	w.elems(name, p, depth+1, nil, nil)
}

func joinBucket(parent string, key []byte) string {
	if parent == "" {
		return printableKey(key)
	}
	return parent + "/" + printableKey(key)
}

// scanLeaves calls fn for every key and value found on any page of data that reads as a
// leaf page, reachable or not, inline buckets included: what Recover uses to find records
// under a damaged branch page, which hides them from a walk of the tree.
func scanLeaves(data []byte, pageSize int, fn func(pg uint64, key, value []byte)) {
	for id := uint64(2); (id+1)*uint64(pageSize) <= uint64(len(data)); id++ {
		off := id * uint64(pageSize)
		p := parsePage(data[off:])
		if p.flags != flagLeaf || p.count == 0 {
			continue
		}
		end := min(off+(uint64(p.overflow)+1)*uint64(pageSize), uint64(len(data)))
		p.b = data[off:end]
		scanPage(id, p, 0, fn)
	}
}

func scanPage(id uint64, p page, depth int, fn func(pg uint64, key, value []byte)) {
	es, err := p.elems()
	if err != nil {
		return
	}
	for _, e := range es {
		if !e.bucket {
			fn(id, e.key, e.value)
			continue
		}
		if depth == 0 && len(e.value) >= bucketHdrSize && ne.Uint64(e.value) == 0 { // no nesting: see elems
			if ip, err := inlinePage(e.value); err == nil {
				scanPage(id, ip, depth+1, fn)
			}
		}
	}
}
