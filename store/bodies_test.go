package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bodyFiles lists the message files of the store in dir.
func bodyFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, BodiesDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// A message of BodyFileBytes or more is kept in a file of its own: its inbox record holds its
// metadata only, applying it copies nothing into bbolt's pages, Pending leaves it in its
// file, InboxRaw reads it, and Ack removes the file and gives the sender's share back. A copy
// that turns out a duplicate, and a message taken before its apply, leave no file behind.
func TestBodies_ALargeMessageIsKeptInAFileOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, WithMaxInboxBytes(64<<20), WithMaxSenderInboxBytes(64<<20))
	stopApplier(s)
	m, raw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 3<<20)
	accept(t, s, m, raw)
	if res := accept(t, s, m, raw); !res.Duplicate { // its copy's file goes at once
		t.Fatalf("a copy: %+v, want a duplicate", res)
	}
	gone, goneRaw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 2<<20)
	accept(t, s, gone, goneRaw)
	if err := s.AckLazily(t.Context(), gone.Envelope.MessageID); err != nil { // taken before its apply
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.applyReady(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("applying a %d MiB message allocated %d KiB: bbolt copied it", len(raw)>>20, grew>>10)
	}
	if files := bodyFiles(t, dir); len(files) != 1 {
		t.Fatalf("message files after the apply: %v, want one", files)
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktInbox).ForEach(func(_, v []byte) error {
			if len(v) > 1<<10 {
				t.Errorf("the inbox record is %d bytes: it holds the message", len(v))
			}
			return nil
		})
	})
	p, err := s.Pending()
	if err != nil || len(p) != 1 || p[0].Raw != nil || p[0].Size != int64(len(raw)) {
		t.Fatalf("pending: %d entries, %v; want one of %d bytes left in its file", len(p), err, len(raw))
	}
	got, err := s.InboxRaw(m.Envelope.MessageID)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("InboxRaw: %d bytes, %v", len(got), err)
	}
	if err := s.Ack(m.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if files := bodyFiles(t, dir); len(files) != 0 {
		t.Fatalf("message files after the ack: %v, want none", files)
	}
	if u := s.Usage(); u.InboxBytes != 0 || len(u.InboxBySender) != 0 {
		t.Fatalf("the inbox still counts %d bytes (%v) after the ack", u.InboxBytes, u.InboxBySender)
	}
	if _, err := s.InboxRaw(m.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("InboxRaw of a taken message: %v, want ErrNotFound", err)
	}
}

// A file no record names (a crash between an ack's commit and the file's removal, or before
// the commit that would have named it) is removed at Open; the files records name stay, and
// the counters count them at their size.
func TestBodies_FilesNoRecordNamesAreRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, WithMaxInboxBytes(64<<20), WithMaxSenderInboxBytes(64<<20))
	m, raw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 2<<20)
	accept(t, s, m, raw)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, BodiesDir, "00000000000003e7.msg")
	if err := os.WriteFile(stray, []byte("left by a crash"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, WithMaxInboxBytes(64<<20), WithMaxSenderInboxBytes(64<<20))
	if files := bodyFiles(t, dir); len(files) != 1 || files[0] == filepath.Base(stray) {
		t.Fatalf("message files after Open: %v, want the named one only", files)
	}
	if u := s.Usage(); u.InboxBySender["p1"] != int64(len(raw)) {
		t.Fatalf("the sender's share after Open: %d bytes, want %d", u.InboxBySender["p1"], len(raw))
	}
	if got, err := s.InboxRaw(m.Envelope.MessageID); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("InboxRaw after Open: %d bytes, %v", len(got), err)
	}
}

// A missing message file is damage: Open refuses the store, Check names the record, and
// Recover keeps every other message and lists the lost one; a recovered store keeps a large
// message whose file is sound.
func TestBodies_AMissingFileIsDamageAndRecoverKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, WithMaxInboxBytes(64<<20), WithMaxSenderInboxBytes(64<<20))
	lost, lostRaw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 2<<20)
	kept, keptRaw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 2<<20)
	small, smallRaw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 100)
	accept(t, s, lost, lostRaw)
	accept(t, s, kept, keptRaw)
	accept(t, s, small, smallRaw)
	lostFile := bodyOf(t, s, lost.Envelope.MessageID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, BodiesDir, lostFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a message file missing: %v, want ErrCorrupt", err)
	}
	if rep, err := Check(dir); err != nil || rep.OK() || !hasProblemIn(rep, string(bktInbox)) {
		t.Fatalf("Check with a message file missing: %v %v", rep.Problems, err)
	}
	rep, err := Recover(dir)
	if err != nil || rep.Inbox != 2 || len(rep.Lost) != 1 || rep.Lost[0] != lost.Envelope.MessageID {
		t.Fatalf("Recover: %d inbox messages, lost %v (%v); want 2 and the one whose file is gone", rep.Inbox, rep.Lost, err)
	}
	s = open(t, dir)
	for id, want := range map[string][]byte{kept.Envelope.MessageID: keptRaw, small.Envelope.MessageID: smallRaw} {
		if got, err := s.InboxRaw(id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("InboxRaw of %s after Recover: %d bytes, %v", id, len(got), err)
		}
	}
}

// bodyOf returns the name of the file that holds the inbox message id.
func bodyOf(t *testing.T, s *Store, id string) string {
	t.Helper()
	if err := s.applyReady(); err != nil {
		t.Fatal(err)
	}
	var m inboxMeta
	err := s.db.View(func(tx *bolt.Tx) error {
		seq := tx.Bucket(bktInboxID).Get([]byte(id))
		if seq == nil {
			return ErrNotFound
		}
		_, err := recordParts(tx.Bucket(bktInbox).Get(seq), &m)
		return err
	})
	if err != nil || m.Body == "" {
		t.Fatalf("the file of %s: %q (%v)", id, m.Body, err)
	}
	return m.Body
}
