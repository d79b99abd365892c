package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// keysOn returns the outbox message ids whose records are on page id.
func (f *storeFixture) keysOn(t *testing.T, id uint64) map[string]bool {
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
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range es {
		out[string(e.key)] = true
	}
	return out
}

// recoverAndServe runs Recover on the damaged fixture and checks what the recovered store
// serves: every outbox message except those in lost (which may or may not come back, from
// older copies of their page), nothing that was not put, and every inbox message, still
// pending and still a duplicate when resent.
func recoverAndServe(t *testing.T, f *storeFixture, lost map[string]bool) RecoverReport {
	t.Helper()
	rep, err := Recover(f.dir)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if len(rep.Unreadable) == 0 {
		t.Fatal("recover reports no damage in a damaged file")
	}
	if m, _ := filepath.Glob(filepath.Join(f.dir, FileName+".damaged-*")); len(m) != 1 || m[0] != rep.DamagedPath {
		t.Fatalf("damaged file kept as %v, report says %s", m, rep.DamagedPath)
	}
	if c, err := Check(f.dir); err != nil || !c.OK() {
		t.Fatalf("check of the recovered store: %v %v", c.Problems, err)
	}
	s := open(t, f.dir, WithClock(newClock().Now))
	for id, raw := range f.outbox {
		e, err := s.Get(id)
		switch {
		case err == nil && !bytes.Equal(e.Raw, raw):
			t.Fatalf("recovered outbox message %s has other bytes", id)
		case err != nil && !lost[id]:
			t.Fatalf("outbox message %s on an undamaged page was not recovered: %v", id, err)
		}
	}
	l, _ := s.List()
	if len(l) != rep.Outbox || len(l) > len(f.outbox) {
		t.Fatalf("recovered store lists %d outbox messages; the report says %d; %d were put", len(l), rep.Outbox, len(f.outbox))
	}
	for _, e := range l {
		if f.outbox[e.MessageID] == nil {
			t.Fatalf("recovered outbox holds %s, which was never put (or was delivered)", e.MessageID)
		}
	}
	p, _ := s.Pending()
	if len(p) != len(f.inbox) || rep.Inbox != len(f.inbox) {
		t.Fatalf("recovered inbox: %d pending, report %d, want %d", len(p), rep.Inbox, len(f.inbox))
	}
	for _, e := range p {
		if !bytes.Equal(f.inbox[e.MessageID], e.Raw) || e.Peer != "peerA" {
			t.Fatalf("recovered inbox message %s differs", e.MessageID)
		}
		m, err := protocol.DecodeJSON(e.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := s.Accept(m, e.Raw); err != nil || !res.Duplicate {
			t.Fatalf("resent after recovery: %+v %v, want a duplicate", res, err)
		}
	}
	t.Logf("recovered %d outbox (%d from raw pages), %d inbox, %d seen; %d stale; damage: %v",
		rep.Outbox, rep.FromRawPages, rep.Inbox, rep.Seen, rep.Stale, rep.Unreadable[0])
	return rep
}

func TestRecoverDamagedLeafPage(t *testing.T) {
	f := newFixture(t, 600)
	leaf := f.find(t, "outbox", flagLeaf).id
	lost := f.keysOn(t, leaf)
	f.scribble(t, leaf, 0)
	assertCorrupt(t, f.dir, "outbox")
	rep := recoverAndServe(t, f, lost)
	if rep.Outbox+len(rep.Lost) != len(f.outbox) {
		t.Fatalf("recovered %d and lost %v of %d: the report must name every message it could not read", rep.Outbox, rep.Lost, len(f.outbox))
	}
	for _, id := range rep.Lost {
		if !lost[id] {
			t.Fatalf("%s reported lost but was not on the damaged page", id)
		}
	}
}

// A damaged branch page hides every leaf under it from a walk of the tree; reading the file
// page by page finds them all.
func TestRecoverDamagedBranchPage(t *testing.T) {
	f := newFixture(t, 600)
	f.scribble(t, f.find(t, "outbox", flagBranch).id, 0)
	assertCorrupt(t, f.dir, "outbox")
	rep := recoverAndServe(t, f, nil)
	if rep.Outbox != len(f.outbox) || rep.FromRawPages == 0 {
		t.Fatalf("recovered %d of %d outbox messages, %d from raw pages", rep.Outbox, len(f.outbox), rep.FromRawPages)
	}
}

func TestRecoverDamagedMetaPages(t *testing.T) {
	for _, pages := range [][]uint64{{0}, {1}, {0, 1}} {
		f := newFixture(t, 300)
		for _, id := range pages {
			f.scribble(t, id, 0)
		}
		assertCorrupt(t, f.dir, "")
		if rep := recoverAndServe(t, f, nil); rep.Outbox != len(f.outbox) {
			t.Fatalf("meta pages %v damaged: recovered %d of %d outbox messages", pages, rep.Outbox, len(f.outbox))
		}
	}
}

// Copies on free pages of messages already delivered or taken do not come back.
func TestRecoverLeavesDeliveredAndTakenMessagesOut(t *testing.T) {
	f := newFixture(t, 600)
	s := open(t, f.dir, WithClock(newClock().Now))
	n := 0
	for id := range f.outbox {
		if n++; n%3 == 0 {
			if ok, err := s.Delivered(id); !ok || err != nil {
				t.Fatal(err)
			}
			delete(f.outbox, id)
		}
	}
	for id := range f.inbox {
		if err := s.Ack(id); err != nil {
			t.Fatal(err)
		}
		delete(f.inbox, id)
		break
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	leaf := f.find(t, "outbox", flagLeaf).id
	lost := f.keysOn(t, leaf)
	f.scribble(t, leaf, 0)
	rep := recoverAndServe(t, f, lost)
	if rep.Stale == 0 {
		t.Fatal("no stale copy found: the test does not exercise free pages")
	}
}

func TestRecoverRefusesWhileOpen(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	if _, err := Recover(dir, WithLockTimeout(time.Millisecond)); !errors.Is(err, ErrLocked) {
		t.Fatalf("recover while a node has the store open: %v, want ErrLocked", err)
	}
	if _, err := Check(dir, WithLockTimeout(time.Millisecond)); !errors.Is(err, ErrLocked) {
		t.Fatalf("check while a node has the store open: %v, want ErrLocked", err)
	}
}

// Messages held for approval are in the recovered store, still waiting for a decision.
func TestRecoverKeepsMessagesHeldForApproval(t *testing.T) {
	f := newFixture(t, 300)
	c := newClock()
	s := open(t, f.dir, WithClock(c.Now))
	held := map[string]bool{}
	for range 3 {
		m, raw := msg(t, "a:h:bob", t0, 3600, 10)
		if err := s.Hold(approvalOf(m, raw), ApprovalLimits{MaxCount: 10, MaxBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		held[m.Envelope.MessageID] = true
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.scribble(t, f.find(t, "outbox", flagBranch).id, 0)
	rep, err := Recover(f.dir)
	if err != nil || rep.Approvals != len(held) {
		t.Fatalf("recover: %d approvals, %v; want %d", rep.Approvals, err, len(held))
	}
	s = open(t, f.dir, WithClock(c.Now))
	got, err := s.Held()
	if err != nil || len(got) != len(held) {
		t.Fatalf("held after recover: %d, %v", len(got), err)
	}
	for _, a := range got {
		if !held[a.MessageID] {
			t.Fatalf("%s held after recover, never held before", a.MessageID)
		}
	}
}
