package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// This file reads bbolt's file format (go.etcd.io/bbolt v1.4.3, internal/common) directly,
// with every offset checked against the bytes at hand, so that a damaged file can be checked
// and its records read without going through bbolt, whose readers trust the file: on a
// damaged page they panic (some of them on a goroutine of their own, which no recover can
// catch) or read outside the mapping.
//
// A page starts with a 16-byte header {id uint64, flags uint16, count uint16, overflow
// uint32}; a page with overflow n spans n+1 pages. Leaf elements are {flags, pos, ksize,
// vsize uint32}, branch elements {pos, ksize uint32, pgid uint64}; pos counts from the
// element itself. Pages 0 and 1 are meta pages. Integers are in the machine's byte order.

const (
	pageHeaderSize = 16
	leafElemSize   = 16
	branchElemSize = 16
	bucketHdrSize  = 16 // {root pgid, sequence uint64}: a bucket's value in its parent

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
	elemBucket   = 0x01 // leaf element flag: the value is a nested bucket

	boltMagic   = 0xED0CDAED
	boltVersion = 2
	noFreelist  = ^uint64(0)

	// maxTreeDepth bounds the walk: a B+tree of 4 KiB pages holding 2^48 keys is about 12
	// levels deep, so 64 only stops a cycle the page-visited set has not caught yet.
	maxTreeDepth = 64
)

var ne = binary.NativeEndian

// boltMeta is one meta page, as read from the file.
type boltMeta struct {
	pageSize uint32
	root     uint64 // root bucket's page
	freelist uint64 // noFreelist when the freelist is not stored
	hwm      uint64 // pages in use: every valid page id is below it
	txid     uint64
	err      error // why this meta page cannot be used; nil when it is valid
}

// parseMeta reads the meta page at id (0 or 1) from b, which starts at that page.
func parseMeta(id uint64, b []byte) boltMeta {
	if len(b) < pageHeaderSize+64 {
		return boltMeta{err: fmt.Errorf("meta page %d is cut off by the end of the file", id)}
	}
	h := b[pageHeaderSize:]
	m := boltMeta{
		pageSize: ne.Uint32(h[8:]), root: ne.Uint64(h[16:]), freelist: ne.Uint64(h[32:]),
		hwm: ne.Uint64(h[40:]), txid: ne.Uint64(h[48:]),
	}
	sum := fnv.New64a()
	_, _ = sum.Write(h[:56])
	switch {
	case ne.Uint32(h[0:]) != boltMagic:
		m.err = fmt.Errorf("meta page %d has no bbolt magic number", id)
	case ne.Uint32(h[4:]) != boltVersion:
		m.err = fmt.Errorf("meta page %d has format version %d, not %d", id, ne.Uint32(h[4:]), boltVersion)
	case ne.Uint64(h[56:]) != sum.Sum64():
		m.err = fmt.Errorf("meta page %d fails its checksum", id)
	case ne.Uint64(b) != id || ne.Uint16(b[8:]) != flagMeta:
		m.err = fmt.Errorf("meta page %d has a damaged page header", id)
	case m.pageSize < 512 || m.pageSize > 1<<20 || m.pageSize&(m.pageSize-1) != 0:
		m.err = fmt.Errorf("meta page %d names page size %d", id, m.pageSize)
	case m.root < 2 || m.root >= m.hwm || (m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.hwm)):
		m.err = fmt.Errorf("meta page %d points outside the file's %d pages", id, m.hwm)
	}
	return m
}

// readMetas reads both meta pages of data. It returns them and the page size to read the
// file with: a valid meta's, or fallback when neither is valid.
func readMetas(data []byte, fallback int) (metas [2]boltMeta, pageSize int) {
	metas[0] = parseMeta(0, data)
	pageSize = fallback
	if metas[0].err == nil {
		pageSize = int(metas[0].pageSize)
	}
	metas[1] = metaOne(data, pageSize)
	if metas[0].err != nil && metas[1].err != nil {
		for ps := 512; ps <= 1<<20; ps *= 2 { // page 0 is lost: look for page 1 at every size
			if m := metaOne(data, ps); m.err == nil {
				metas[1] = m
				break
			}
		}
	}
	if metas[0].err != nil && metas[1].err == nil {
		pageSize = int(metas[1].pageSize)
	}
	return metas, pageSize
}

func metaOne(data []byte, pageSize int) boltMeta {
	if len(data) < pageSize {
		return boltMeta{err: fmt.Errorf("meta page 1 is cut off by the end of the file")}
	}
	return parseMeta(1, data[pageSize:])
}

// current returns the meta bbolt would use (the valid one with the higher txid), or false.
func current(metas [2]boltMeta) (boltMeta, bool) {
	a, b := metas[0], metas[1]
	if b.txid > a.txid {
		a, b = b, a
	}
	if a.err == nil {
		return a, true
	}
	return b, b.err == nil
}

// page is one page (with its overflow) or an inline bucket's page, bounds-checked.
type page struct {
	id       uint64
	flags    uint16
	count    int
	overflow uint32
	b        []byte // the page's bytes: header, elements, keys and values
}

// pageAt returns the page stored at id in data (a whole file) if its header fits.
func pageAt(data []byte, pageSize int, id uint64) (page, error) {
	off := id * uint64(pageSize)
	if off+pageHeaderSize > uint64(len(data)) || off/uint64(pageSize) != id {
		return page{}, fmt.Errorf("the page lies beyond the end of the file")
	}
	p := parsePage(data[off:])
	span := (uint64(p.overflow) + 1) * uint64(pageSize)
	if uint64(p.overflow) > uint64(len(data)) || off+span > uint64(len(data)) {
		return p, fmt.Errorf("the page claims %d overflow pages, past the end of the file", p.overflow)
	}
	p.b = data[off : off+span]
	return p, nil
}

func parsePage(b []byte) page {
	return page{id: ne.Uint64(b), flags: ne.Uint16(b[8:]), count: int(ne.Uint16(b[10:])), overflow: ne.Uint32(b[12:]), b: b}
}

// elem is one element of a leaf or branch page.
type elem struct {
	key, value []byte
	bucket     bool   // leaf: the value is a nested bucket
	child      uint64 // branch: the page the key leads to
}

// elems returns the page's elements, each key and value checked to lie inside the page.
func (p page) elems() ([]elem, error) {
	size := leafElemSize
	if p.flags == flagBranch {
		size = branchElemSize
	}
	if pageHeaderSize+p.count*size > len(p.b) {
		return nil, fmt.Errorf("%d elements do not fit in the page", p.count)
	}
	out := make([]elem, p.count)
	for i := range out {
		at := pageHeaderSize + i*size
		e := p.b[at:]
		var pos, ksize, vsize uint64
		if p.flags == flagBranch {
			pos, ksize, out[i].child = uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
		} else {
			out[i].bucket = ne.Uint32(e)&elemBucket != 0
			pos, ksize, vsize = uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		}
		start := uint64(at) + pos
		if start+ksize+vsize > uint64(len(p.b)) || (start < uint64(pageHeaderSize+p.count*size) && ksize+vsize > 0) {
			return nil, fmt.Errorf("element %d points outside the page", i)
		}
		out[i].key = p.b[start : start+ksize : start+ksize]
		out[i].value = p.b[start+ksize : start+ksize+vsize : start+ksize+vsize]
		if i > 0 && bytes.Compare(out[i-1].key, out[i].key) >= 0 {
			return nil, fmt.Errorf("key %d is not after key %d: the keys are out of order", i, i-1)
		}
	}
	return out, nil
}

// inlinePage returns the page stored inside a bucket value whose root is 0.
func inlinePage(v []byte) (page, error) {
	if len(v) < bucketHdrSize+pageHeaderSize {
		return page{}, fmt.Errorf("inline bucket of %d bytes is too short", len(v))
	}
	p := parsePage(v[bucketHdrSize:])
	if p.flags != flagLeaf {
		return page{}, fmt.Errorf("inline bucket page has flags %#x, not a leaf", p.flags)
	}
	return p, nil
}
