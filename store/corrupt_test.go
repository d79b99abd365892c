package store

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// storeFixture is a closed store file with known contents: n outbox messages (enough for a
// multi-level tree), a few inbox messages, and their seen ids. Every Put and Accept is a
// commit of its own, so older copies of pages lie on free pages, as in a node's store.
type storeFixture struct {
	dir    string
	outbox map[string][]byte // message id -> raw
	inbox  map[string][]byte
}

// fixtures caches the file and contents of each fixture size, built once per test binary:
// every test gets its own copy of the file.
var fixtures struct {
	sync.Mutex
	built map[int]*storeFixture // the contents; each test writes files[n] into a dir of its own
	files map[int][]byte
}

func newFixture(t *testing.T, n int) *storeFixture {
	t.Helper()
	fixtures.Lock()
	defer fixtures.Unlock()
	if fixtures.built == nil {
		fixtures.built, fixtures.files = map[int]*storeFixture{}, map[int][]byte{}
	}
	if fixtures.built[n] == nil {
		f := buildFixture(t, n)
		b, err := os.ReadFile(f.path())
		if err != nil {
			t.Fatal(err)
		}
		fixtures.built[n], fixtures.files[n] = f, b
	}
	src := fixtures.built[n]
	f := &storeFixture{dir: t.TempDir(), outbox: maps.Clone(src.outbox), inbox: maps.Clone(src.inbox)}
	if err := os.WriteFile(f.path(), fixtures.files[n], 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func buildFixture(t *testing.T, n int) *storeFixture {
	t.Helper()
	f := &storeFixture{dir: t.TempDir(), outbox: map[string][]byte{}, inbox: map[string][]byte{}}
	s, err := Open(f.dir, WithBatchDelay(0), WithClock(newClock().Now), WithNoSync(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		m, raw := msg(t, "a:h:bob"+string(rune('a'+i%4)), t0, 3600, 300)
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
		f.outbox[m.Envelope.MessageID] = raw
	}
	for range 5 {
		m, raw := msgFrom(t, "peerA", "a:h:me", t0, 3600, 100)
		if _, err := s.Accept(m, raw); err != nil {
			t.Fatal(err)
		}
		f.inbox[m.Envelope.MessageID] = raw
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *storeFixture) path() string { return filepath.Join(f.dir, FileName) }

// treePage is a page of a bucket's tree, found by walking the file's bytes.
type treePage struct {
	bucket string
	id     uint64
	flags  uint16
	depth  int
}

// pages lists every page of every top-level bucket's tree.
func (f *storeFixture) pages(t *testing.T) []treePage {
	t.Helper()
	data, err := os.ReadFile(f.path())
	if err != nil {
		t.Fatal(err)
	}
	metas, ps := readMetas(data, os.Getpagesize())
	m, ok := current(metas)
	if !ok {
		t.Fatal("fixture has no valid meta page")
	}
	root, err := pageAt(data, ps, m.root)
	if err != nil {
		t.Fatal(err)
	}
	es, err := root.elems()
	if err != nil {
		t.Fatal(err)
	}
	var out []treePage
	var walk func(bucket string, id uint64, depth int)
	walk = func(bucket string, id uint64, depth int) {
		p, err := pageAt(data, ps, id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, treePage{bucket, id, p.flags, depth})
		if p.flags == flagBranch {
			cs, _ := p.elems()
			for _, c := range cs {
				walk(bucket, c.child, depth+1)
			}
		}
	}
	for _, e := range es {
		if r := ne.Uint64(e.value); r != 0 {
			walk(string(e.key), r, 0)
		}
	}
	return out
}

// find returns a page of bucket with the given flags, the deepest-first for branches.
func (f *storeFixture) find(t *testing.T, bucket string, flags uint16) treePage {
	t.Helper()
	for _, p := range f.pages(t) {
		if p.bucket == bucket && p.flags == flags {
			return p
		}
	}
	t.Fatalf("the fixture has no %#x page in bucket %s", flags, bucket)
	return treePage{}
}

// scribble overwrites page id from byte `from` on with random bytes, as a bad disk or a
// stray write would.
func (f *storeFixture) scribble(t *testing.T, id uint64, from int) {
	t.Helper()
	file, err := os.OpenFile(f.path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ps := os.Getpagesize()
	junk := make([]byte, ps-from)
	r := rand.New(rand.NewPCG(id, uint64(from)))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	if _, err := file.WriteAt(junk, int64(id)*int64(ps)+int64(from)); err != nil {
		t.Fatal(err)
	}
}

// valueOffset returns where, in page id, the value of its middle element starts.
func (f *storeFixture) valueOffset(t *testing.T, id uint64) int {
	t.Helper()
	data, err := os.ReadFile(f.path())
	if err != nil {
		t.Fatal(err)
	}
	p, err := pageAt(data, os.Getpagesize(), id)
	if err != nil {
		t.Fatal(err)
	}
	es, err := p.elems()
	if err != nil || len(es) == 0 {
		t.Fatalf("page %d: %d elements, %v", id, len(es), err)
	}
	return bytes.Index(p.b, es[len(es)/2].value)
}

// assertCorrupt checks that Open refuses the file with a *CorruptError that names it and the
// commands to run, and that Check reports damage (in bucket, when given).
func assertCorrupt(t *testing.T, dir, bucket string) CheckReport {
	t.Helper()
	_, err := Open(dir, WithBatchDelay(0))
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("open of a damaged store: %v, want ErrCorrupt", err)
	}
	for _, want := range []string{filepath.Join(dir, FileName), "iacp-node store check --data-dir D", "iacp-node store recover --data-dir D", "data directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error does not say %q: %v", want, err)
		}
	}
	rep, err := Check(dir)
	if err != nil || rep.OK() {
		t.Fatalf("check of a damaged store: ok=%v err=%v", rep.OK(), err)
	}
	if bucket != "" && !hasProblemIn(rep, bucket) {
		t.Fatalf("check names no problem in bucket %s: %v", bucket, rep.Problems)
	}
	return rep
}

func hasProblemIn(rep CheckReport, bucket string) bool {
	for _, p := range rep.Problems {
		if p.Bucket == bucket {
			return true
		}
	}
	return false
}

func TestCheckIntactStore(t *testing.T) {
	f := newFixture(t, 600)
	rep, err := Check(f.dir)
	if err != nil || !rep.OK() {
		t.Fatalf("check of an intact store: %v %v", rep.Problems, err)
	}
	if rep.Records["outbox"] != 600 || rep.Records["inbox"] != 5 || rep.Records["seen"] != 5 || rep.Records["outbox_due"] != 600 {
		t.Fatalf("record counts %v", rep.Records)
	}
	if d := f.find(t, "outbox", flagBranch); d.depth != 0 {
		t.Fatalf("outbox root is not a branch page: %+v", d)
	}
	s := open(t, f.dir)
	if u := s.Usage(); len(u.ByRecipient) != 4 {
		t.Fatalf("usage after check: %+v", u)
	}
}

func TestOpenRefusesDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bucket string
		damage func(t *testing.T, f *storeFixture)
	}{
		{"leaf page", "outbox", func(t *testing.T, f *storeFixture) { f.scribble(t, f.find(t, "outbox", flagLeaf).id, 0) }},
		{"leaf page body, header intact", "outbox", func(t *testing.T, f *storeFixture) {
			f.scribble(t, f.find(t, "outbox", flagLeaf).id, pageHeaderSize)
		}},
		{"leaf page records, elements intact", "outbox", func(t *testing.T, f *storeFixture) {
			id := f.find(t, "outbox", flagLeaf).id
			f.scribble(t, id, f.valueOffset(t, id))
		}},
		{"branch page", "outbox", func(t *testing.T, f *storeFixture) { f.scribble(t, f.find(t, "outbox", flagBranch).id, 0) }},
		{"branch page body", "outbox", func(t *testing.T, f *storeFixture) {
			f.scribble(t, f.find(t, "outbox", flagBranch).id, pageHeaderSize)
		}},
		{"meta page 0", "", func(t *testing.T, f *storeFixture) { f.scribble(t, 0, pageHeaderSize) }},
		{"meta page 1", "", func(t *testing.T, f *storeFixture) { f.scribble(t, 1, 0) }},
		{"both meta pages", "", func(t *testing.T, f *storeFixture) { f.scribble(t, 0, 0); f.scribble(t, 1, 0) }},
		{"truncated file", "", func(t *testing.T, f *storeFixture) {
			// Cut below the pages in use (the file grows in steps beyond them: the end of it
			// may hold nothing yet).
			if err := os.Truncate(f.path(), 64<<10); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 600)
			tc.damage(t, f)
			assertCorrupt(t, f.dir, tc.bucket)
		})
	}
}

// A record whose page is sound but whose bytes changed is found by decoding it.
func TestOpenRefusesAnUndecodableRecord(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	m, raw := msg(t, "a:h:bob", time.Now(), 600, 10)
	if err := s.Put(m, raw); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), `{"id":"`+m.Envelope.MessageID)
	if i < 0 {
		t.Fatal("record not found in the file")
	}
	b[i] = 'X'
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := assertCorrupt(t, dir, "outbox")
	if rep.Problems[0].Key != m.Envelope.MessageID || !strings.Contains(rep.Problems[0].What, "metadata") {
		t.Fatalf("check names %+v, want the record of %s", rep.Problems[0], m.Envelope.MessageID)
	}
}
