package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/iacp-node/iacp-node/protocol"
	bolt "go.etcd.io/bbolt"
)

// The inbox journal (issue 20). A message the node accepts must be on disk before its receipt
// leaves, and a bbolt commit syncs twice (the pages, then the meta page): about 0.5 ms of a
// durable round trip on this machine's disk. So AcceptAll does not commit to bbolt: it checks
// the messages against the seen set (bbolt's and the journal's), appends the new ones to the
// journal, a file written in place, and syncs it once (fdatasync), sharing that sync with every
// AcceptAll that queued meanwhile (a group commit of its own, like commit.go's). Then the
// receipt may go. The applier (journalapply.go) moves journaled messages into bbolt, in
// batches and off the path, through the ordinary group commit; until then they live in
// memory too, and every read of the inbox or the seen set (Pending, Seen, SeenLen, PurgeSeen)
// and every Ack first applies what is waiting.
//
// The file. Open allocates journalPrealloc bytes once, so that a synced append changes no
// file size and fdatasync writes no metadata. Records follow one another from offset 0:
//
//	length (4, little-endian) | CRC-32C of the rest (4) | record number (8) | inbox record
//
// where the inbox record is encodeInbox's, as bbolt stores it. Numbers rise by one from
// record to record. When every journaled message is in bbolt (its commit synced) the next
// record starts again at offset 0, over the old ones; so does a write that would pass
// journalLimit, after it applied everything first. Reading stops at the first record that is
// short, zero, too long, fails its CRC or does not follow its predecessor's number: old
// records left behind a newer run are never taken for new ones, and a record torn by a crash
// (its sync never returned, so its sender got no receipt) ends the journal.
//
// Open replays the journal into bbolt before anything else. Replaying a record is idempotent:
// a message whose id bbolt has in its seen set (applied already, perhaps acknowledged since)
// or that has expired is skipped, so replaying old records does no harm.

// JournalFile is the name of the inbox journal inside the store's directory.
const JournalFile = "inbox.journal"

const (
	// journalPrealloc is what Open allocates for a new journal: 4 MiB, about 3,000 messages of
	// 1 KiB between two starts over.
	journalPrealloc = 4 << 20
	// journalLimit is the offset past which a write first applies everything and starts over.
	journalLimit = 8 << 20
	// journalHeader is a record's length, CRC and number.
	journalHeader = 16
	// maxJournalBody bounds one inbox record: the largest message a node may be configured to
	// read (protocol.MaxMessageBytesLimit) and the record's metadata; AcceptAll refuses a
	// larger message alone. What replay reads is bounded by the file's size, which no record
	// exceeds.
	maxJournalBody = protocol.MaxMessageBytesLimit + journalMeta
	// journalMeta is room for a record's metadata: ids, peer and times.
	journalMeta = 64 << 10
	// journalScratch is the largest buffer of records the journal keeps for its next write.
	journalScratch = 256 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// jentry is one message the journal holds for bbolt.
type jentry struct {
	e     *InboxEntry
	acked bool          // acknowledged before it was applied: the apply writes its seen id only
	taken bool          // an apply is committing it (acked can no longer change)
	done  chan struct{} // closed once applied, or when the store closes (then err says so)
	err   error
}

// jwrite is one AcceptAll's turn in the journal's group commit.
type jwrite struct {
	entries []*jentry
	done    chan outcome
}

// journal is the write-ahead file and what it holds that bbolt does not have yet.
type journal struct {
	f      *os.File
	noSync bool

	mu         sync.Mutex
	err        error              // a write or sync failed: every later write fails with it
	closed     bool               // Close began: no more writes
	pending    map[string]*jentry // journaled or being journaled, not yet applied, by message id
	ready      []*jentry          // synced and waiting for the applier, in journal order
	readyBytes int64              // the raw bytes of ready
	queue      []*jwrite          // waiting for the next write
	writing    bool               // a leader is writing
	writers    sync.WaitGroup     // AcceptAll calls between admit and their outcome
	off        int64              // where the next record goes
	lsn        uint64             // the last record's number
	seq        uint64             // the last inbox sequence number handed out
	scratch    []byte             // the leader's buffer of records, kept between writes
}

// openJournal opens (creating and allocating) the journal in dir and returns it with the
// entries it holds, in order.
func openJournal(dir string, noSync bool) (*journal, []*InboxEntry, error) {
	path := filepath.Join(dir, JournalFile)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = createJournal(path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: journal: %w", err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() < journalPrealloc {
		// A crash inside createJournal left the file without its allocation: every append
		// would then grow it, and its sync write the file's size too.
		if err = preallocate(f, journalPrealloc); err == nil {
			err = f.Sync()
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("store: journal %s: %w", path, err)
	}
	entries, last, _, err := parseJournal(f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("store: journal %s: %w", path, err)
	}
	if last == 0 {
		// No valid record (a new file, or a first record torn by a crash): records of older
		// runs may lie further on, numbered from wherever those runs started. New numbers
		// start at random, so that the record after a new first one never takes the number of
		// an old record that happens to lie where it ends.
		last = rand.Uint64() >> 1
	}
	return &journal{f: f, noSync: noSync, pending: map[string]*jentry{}, lsn: last}, entries, nil
}

// createJournal creates and allocates a new journal and makes its directory entry durable.
func createJournal(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := preallocate(f, journalPrealloc); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil { // or a crash could lose the file
		f.Close()
		return nil, fmt.Errorf("sync the directory of %s: %w", path, err)
	}
	return f, nil
}

// parseJournal reads the records from the start of r, size bytes long, up to the first that
// is not valid (see the file's description), and returns their entries, the last record's
// number (0 for none) and where the valid records end; err is a read that failed (not a
// record that ends the journal). It reads record by record, so that it holds the records'
// bodies and no more: a journal that was emptied (or just allocated) costs one header, not
// its size in memory.
func parseJournal(r io.ReaderAt, size int64) (entries []*InboxEntry, last uint64, end int64, err error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 32<<10)
	var h [journalHeader]byte
	for end+journalHeader <= size {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return entries, last, end, err
		}
		n := int64(binary.LittleEndian.Uint32(h[0:4]))
		if n == 0 || n > maxJournalBody || n > size-end-journalHeader {
			break
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return entries, last, end, err
		}
		lsn := binary.LittleEndian.Uint64(h[8:16])
		if crc32.Update(crc32.Checksum(h[8:16], castagnoli), castagnoli, body) != binary.LittleEndian.Uint32(h[4:8]) {
			break
		}
		if len(entries) > 0 && lsn != last+1 {
			break
		}
		e, err := decodeInbox(body)
		if err != nil {
			break
		}
		entries = append(entries, e)
		last, end = lsn, end+journalHeader+n
	}
	return entries, last, end, nil
}

// appendRecord appends e's journal record numbered lsn to buf, encoding it in place; on
// error buf is returned as it was.
func appendRecord(buf []byte, e *InboxEntry, lsn uint64) ([]byte, error) {
	return appendRecordHead(buf, e, lsn, true)
}

// appendRecordHead is appendRecord for a record whose message (e.Raw) the caller writes
// right after what it appends, unless withRaw: the header still counts and checksums it, so
// that a large message goes from the frame it was read into to the file without a copy.
func appendRecordHead(buf []byte, e *InboxEntry, lsn uint64, withRaw bool) ([]byte, error) {
	start := len(buf)
	raw := e.Raw
	head := *e
	if !withRaw {
		head.Raw = nil
	}
	buf, err := appendInbox(append(buf, make([]byte, journalHeader)...), &head)
	if err != nil {
		return buf[:start], err
	}
	h, body := buf[start:start+journalHeader], buf[start+journalHeader:]
	size := len(body)
	if !withRaw {
		size += len(raw)
	}
	if size > maxJournalBody {
		return buf[:start], fmt.Errorf("message %s: its record (%d bytes) is larger than the journal takes (%d)", e.MessageID, size, maxJournalBody)
	}
	binary.LittleEndian.PutUint32(h[0:4], uint32(size))
	binary.LittleEndian.PutUint64(h[8:16], lsn)
	crc := crc32.Update(crc32.Checksum(h[8:16], castagnoli), castagnoli, body)
	if !withRaw {
		crc = crc32.Update(crc, castagnoli, raw)
	}
	binary.LittleEndian.PutUint32(h[4:8], crc)
	return buf, nil
}

// journalInline is the largest message a journal write copies into its buffer of records;
// a larger one is written from its own bytes, after its record's head.
const journalInline = 64 << 10

// records encodes the records of batch, numbered from lsn+1, into buf and returns what the
// write is made of, in order: pieces of buf and the bytes of the large messages between them.
func records(buf []byte, batch []*jwrite, lsn uint64) (pieces [][]byte, _ []byte, last uint64, err error) {
	from := 0 // where buf's piece not yet in pieces starts
	for _, w := range batch {
		for _, je := range w.entries {
			lsn++
			large := len(je.e.Raw) > journalInline
			if buf, err = appendRecordHead(buf, je.e, lsn, !large); err != nil {
				return nil, buf, lsn, err
			}
			if large {
				pieces = append(pieces, buf[from:], je.e.Raw)
				from = len(buf)
			}
		}
	}
	return append(pieces, buf[from:]), buf, lsn, nil
}

// writePieces writes pieces one after the other from off and returns how many bytes it wrote.
func writePieces(f *os.File, pieces [][]byte, off int64) (int64, error) {
	n := int64(0)
	for _, p := range pieces {
		if len(p) == 0 {
			continue
		}
		if _, err := f.WriteAt(p, off+n); err != nil {
			return n, err
		}
		n += int64(len(p))
	}
	return n, nil
}

// write waits for w's turn in the journal's group commit (admit queued it; lead says whether
// its caller leads) and returns its outcome: nil once its records are synced.
func (s *Store) writeJournal(w *jwrite, lead bool) error {
	if !lead {
		o := <-w.done
		if !o.lead {
			return o.err
		}
	}
	s.leadJournal()
	return (<-w.done).err
}

// leadJournal writes every queued write's records in one write and one sync, then hands the
// lead to the first write queued meanwhile, or ends the run.
func (s *Store) leadJournal() {
	j := s.j
	j.mu.Lock()
	batch := j.queue
	j.queue = nil
	err := j.err
	over := j.off >= journalLimit
	j.mu.Unlock()
	if over && err == nil {
		s.startOver()
	}
	j.mu.Lock()
	off, lsn := j.off, j.lsn
	buf := j.scratch[:0] // the leader's until it hands the lead on
	j.mu.Unlock()
	var pieces [][]byte
	if err == nil {
		pieces, buf, lsn, err = records(buf, batch, lsn)
	}
	var ioErr error // a failed write or sync leaves the file unknown: it fails every later write
	var wrote int64
	if err == nil {
		if wrote, ioErr = writePieces(j.f, pieces, off); ioErr == nil && wrote > 0 && !j.noSync {
			ioErr = fdatasync(j.f)
		}
		if ioErr != nil {
			ioErr = fmt.Errorf("journal: %w", ioErr)
			err = ioErr
		}
	}
	j.mu.Lock()
	for _, w := range batch {
		for _, je := range w.entries {
			if err != nil { // not journaled: whoever waits for its apply hears why
				delete(j.pending, je.e.MessageID)
				je.err = err
				close(je.done)
			} else {
				j.ready = append(j.ready, je)
				j.readyBytes += int64(len(je.e.Raw))
			}
		}
	}
	if ioErr != nil {
		j.err = ioErr
	}
	if err == nil {
		j.off, j.lsn = off+wrote, lsn
	}
	if cap(buf) <= journalScratch {
		j.scratch = buf[:0]
	}
	if len(j.queue) > 0 {
		j.queue[0].done <- outcome{lead: true}
	} else {
		j.writing = false
	}
	j.mu.Unlock()
	for _, w := range batch {
		w.done <- outcome{err: err}
	}
	if err == nil && wrote > 0 {
		s.wakeApplier()
	}
}

// startOver applies everything journaled so far and, when that leaves nothing before the
// current write, moves the next record to offset 0. Only the leader calls it.
func (s *Store) startOver() {
	if err := s.applyReady(); err != nil {
		s.log.Warn("store: journal: applying before starting over failed; the journal grows", "err", err.Error())
		return
	}
	j := s.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.ready) == 0 {
		j.off = 0
	}
}

// replayJournal opens the journal in dir (Open holds bbolt's file lock by then) and applies
// what it holds to db in one synced commit, adding the messages it stores to counts. The
// next record starts at offset 0, numbered after the last one read.
func replayJournal(dir string, db *bolt.DB, cfg *config, counts *counters) (*journal, error) {
	j, entries, err := openJournal(dir, cfg.noSync)
	if err != nil {
		return nil, err
	}
	now := cfg.now()
	var stored []int
	err = db.Update(func(tx *bolt.Tx) error {
		stored = stored[:0]
		for i, e := range entries {
			wrote, err := applyTx(tx, e, false, now)
			if err != nil {
				return err
			}
			if wrote {
				stored = append(stored, i)
			}
		}
		j.seq = tx.Bucket(bktInbox).Sequence()
		return nil
	})
	if err != nil {
		j.f.Close()
		return nil, fmt.Errorf("store: replaying the journal into %s: %w", db.Path(), err)
	}
	for _, i := range stored {
		e := entries[i]
		counts.inTotal += e.Size
		counts.inSender[e.Peer] += e.Size
		if e.body != "" {
			counts.bodies[e.body] = true // the others' files, if any, Open removes
		}
	}
	if len(entries) > 0 {
		cfg.log.Info("store: journal replayed", "records", len(entries), "stored", len(stored))
	}
	return j, nil
}
