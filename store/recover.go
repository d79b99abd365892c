package store

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// RecoverReport says what Recover kept and what it could not read.
type RecoverReport struct {
	// Path is the new store file; DamagedPath is where the damaged one was moved.
	Path, DamagedPath string
	// Outbox, Inbox, Seen, Gossip and Approvals count what the new store holds: queued
	// messages, messages not yet taken by the agent, seen ids, gossip ids, and messages held
	// for approval (read from the tree only: a held message under damage is lost).
	Outbox, Inbox, Seen, Gossip, Approvals int
	// FromRawPages counts the outbox and inbox messages among them that no walk of the tree
	// reached, found by reading the file page by page (under a damaged branch page, or after
	// a damaged meta page).
	FromRawPages int
	// Stale counts copies found on free pages of messages the store had already delivered,
	// taken or expired: they were not brought back.
	Stale int
	// Unreadable lists the damage met: records under it were looked for page by page, and
	// any not found are lost.
	Unreadable []Problem
	// Lost lists the message ids that a surviving index (outbox_due, outbox_exp, outbox_rcpt,
	// inbox_id) names but whose record could not be read anywhere: their senders may need
	// telling. Messages whose index entries were lost too cannot be listed.
	Lost []string
}

// Recover copies every readable message of the store in dir into a new store file, moves
// the damaged file aside as store.db.damaged-<UTC time> and puts the new one in its place.
//
// It walks every bucket of the file, skipping damaged pages, and also reads the file page
// by page, because a damaged branch page hides whole subtrees from a walk: every value that
// decodes as an outbox or inbox record whose document parses as IACP JSON with the record's
// message id is kept, once per message id. Copies on free pages of messages the surviving
// tree shows as delivered or taken are left out; where the tree cannot tell (its buckets or
// a meta page are damaged), the message is kept: a message may then be offered twice, and
// the recipient answers DUPLICATE. The outbox indexes and inbox_id are rebuilt from the
// records; every recovered inbox message's id joins the seen set (with its expiry and
// sender), and every seen and gossip id that reads cleanly is kept.
//
// Recover takes the file's exclusive lock, so it refuses with ErrLocked while a node is
// running on the store. It fails, changing nothing, if it cannot write the new file. Of the
// options, WithLockTimeout, WithClock (the time in the damaged file's name) and WithNoSync
// apply.
func Recover(dir string, opts ...Option) (RecoverReport, error) {
	path := filepath.Join(dir, FileName)
	rep := RecoverReport{Path: path}
	cfg, err := configure(opts)
	if err != nil {
		return rep, err
	}
	_, data, release, err := openForRepair(path, true, cfg.lockTimeout)
	if err != nil {
		return rep, err
	}
	defer release()
	sv := salvageFile(data, filepath.Join(dir, BodiesDir))
	rep.Unreadable, rep.FromRawPages, rep.Stale = sv.problems, sv.fromRaw, sv.stale
	for _, ids := range []map[string]bool{sv.outIdx, sv.inboxIDs} {
		for id := range ids {
			if sv.outbox[id] == nil && sv.inbox[id] == nil {
				rep.Lost = append(rep.Lost, id)
			}
		}
	}
	slices.Sort(rep.Lost)
	tmp := path + ".recovering"
	if err := sv.write(tmp, cfg.noSync); err != nil {
		_ = os.Remove(tmp)
		return rep, fmt.Errorf("store: recover: write %s: %w (the damaged file is unchanged)", tmp, err)
	}
	rep.Outbox, rep.Inbox, rep.Seen, rep.Gossip = len(sv.outbox), len(sv.inbox), len(sv.seen), len(sv.gossip)
	rep.Approvals = len(sv.approvals)
	rep.DamagedPath = path + ".damaged-" + cfg.now().UTC().Format("20060102T150405Z")
	if err := os.Rename(path, rep.DamagedPath); err != nil {
		return rep, fmt.Errorf("store: recover: move the damaged file aside: %w (the recovered store is %s)", err, tmp)
	}
	if err := os.Rename(tmp, path); err != nil {
		return rep, fmt.Errorf("store: recover: %w (the recovered store is %s; rename it to %s)", err, tmp, path)
	}
	if cfg.noSync {
		return rep, nil
	}
	return rep, syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// expiry is a seen or gossip id's value.
type expiry struct {
	exp   time.Time
	owner string
}

// salvage is what Recover found in a damaged file.
type salvage struct {
	outbox    map[string]*OutboxEntry
	inbox     map[string]*InboxEntry
	seen      map[string]expiry
	gossip    map[string]expiry
	rawSeen   map[string]expiry // seen and gossip ids found on raw pages, merged after the scan
	rawGsp    map[string]expiry
	outIdx    map[string]bool   // ids the outbox indexes name
	inboxIDs  map[string]bool   // ids inbox_id names
	approvals map[string][]byte // held messages' records, by id, as the tree holds them
	whole     map[string]bool   // buckets read from their root without damage
	bad       map[string]bool   // buckets with a record that does not decode
	problems  []Problem
	fromRaw   int
	stale     int
	bodies    *bodies // the message files of large inbox messages (bodies.go)
}

// salvageFile reads what it can of the store file data; bodyDir is the directory of its
// message files.
func salvageFile(data []byte, bodyDir string) *salvage {
	sv := &salvage{bodies: &bodies{dir: bodyDir}, outbox: map[string]*OutboxEntry{}, inbox: map[string]*InboxEntry{}, seen: map[string]expiry{},
		gossip: map[string]expiry{}, rawSeen: map[string]expiry{}, rawGsp: map[string]expiry{}, outIdx: map[string]bool{}, inboxIDs: map[string]bool{}, approvals: map[string][]byte{}, whole: map[string]bool{}, bad: map[string]bool{}}
	metas, pageSize := readMetas(data, os.Getpagesize())
	metaOK := metas[0].err == nil && metas[1].err == nil
	for _, m := range metas {
		if m.err != nil {
			sv.problems = append(sv.problems, Problem{What: m.err.Error()})
		}
	}
	if m, ok := current(metas); ok {
		w := newWalker(data, pageSize, m.hwm, sv.visit)
		w.file(m)
		sv.problems = append(sv.problems, w.problems...)
		for _, b := range allBuckets {
			sv.whole[string(b)] = w.whole(string(b)) && !sv.bad[string(b)]
		}
	}
	walked := func(id string) bool { return sv.outbox[id] != nil || sv.inbox[id] != nil }
	raw := map[string]bool{}
	scanLeaves(data, pageSize, func(_ uint64, k, v []byte) {
		switch {
		case len(k) == 8:
			if e := sv.rawInbox(k, v); e != nil && !walked(e.MessageID) && !raw[e.MessageID] {
				if sv.inboxStale(e.MessageID, metaOK) {
					sv.stale++
					return
				}
				raw[e.MessageID], sv.inbox[e.MessageID] = true, e
			}
		case len(k) == 36:
			id := string(k)
			if e := rawOutbox(k, v); e != nil {
				if walked(id) && !raw[id] {
					return
				}
				if !raw[id] && sv.outboxStale(id, metaOK) {
					sv.stale++
					return
				}
				if old := sv.outbox[id]; old == nil || later(e, old) {
					raw[id], sv.outbox[id] = true, e
				}
				return
			}
			sv.rawExpiry(id, v)
		}
	})
	sv.fromRaw = len(raw)
	for _, m := range [][2]map[string]expiry{{sv.rawSeen, sv.seen}, {sv.rawGsp, sv.gossip}} {
		for id, x := range m[0] {
			if old, ok := m[1][id]; !ok || x.exp.After(old.exp) {
				m[1][id] = x
			}
		}
	}
	for id, e := range sv.inbox { // a recovered message must stay a duplicate when resent
		if _, ok := sv.seen[id]; !ok {
			sv.seen[id] = expiry{e.ExpiresAt, e.Peer}
		}
	}
	return sv
}

// visit takes one record of a walk of the tree.
func (sv *salvage) visit(bucket string, k, v []byte) {
	bad := func(err error) {
		sv.problems = append(sv.problems, Problem{Bucket: bucket, Key: printableKey(k), What: err.Error()})
		sv.bad[bucket] = true
	}
	switch bucket {
	case string(bktOutbox):
		if e := rawOutbox(k, v); e != nil {
			sv.outbox[e.MessageID] = e
		} else {
			bad(errors.New("the record does not decode, or its document is not the message it names"))
		}
	case string(bktInbox):
		if e := sv.rawInbox(k, v); e != nil {
			sv.inbox[e.MessageID] = e
		} else {
			bad(errors.New("the record does not decode, or its document is not the message it names"))
		}
	case string(bktOutDue), string(bktOutExp), string(bktOutRcpt):
		sv.outIdx[string(v)] = true
	case string(bktInboxID):
		sv.inboxIDs[string(k)] = true
	case string(bktApprovals):
		if a, err := decodeApproval(v); err != nil || a.MessageID != string(k) {
			bad(errors.New("the approval record does not decode, or is filed under another id"))
			return
		}
		sv.approvals[string(k)] = bytes.Clone(v)
	case string(bktSeen), string(bktGossip):
		kind, set := kindSeen, sv.seen
		if bucket == string(bktGossip) {
			kind, set = kindGossip, sv.gossip
		}
		exp, owner, err := decodeExpiry(kind, v)
		if err != nil {
			bad(err)
			return
		}
		set[string(k)] = expiry{exp, owner}
	}
}

// outboxStale reports whether an outbox record found only on a raw page is a leftover of a
// message already delivered or expired: the tree is the last commit (both meta pages are
// sound) and the outbox or one of its indexes was read whole without naming it.
func (sv *salvage) outboxStale(id string, metaOK bool) bool {
	whole := sv.whole[string(bktOutbox)] || sv.whole[string(bktOutDue)] ||
		sv.whole[string(bktOutExp)] || sv.whole[string(bktOutRcpt)]
	return metaOK && whole && !sv.outIdx[id]
}

// inboxStale reports whether an inbox record found only on a raw page is a leftover of a
// message the agent already took: the inbox or inbox_id was read whole without naming it,
// and either the tree is the last commit or its seen set shows the message was accepted.
func (sv *salvage) inboxStale(id string, metaOK bool) bool {
	whole := sv.whole[string(bktInbox)] || sv.whole[string(bktInboxID)]
	_, seen := sv.seen[id]
	return whole && !sv.inboxIDs[id] && (metaOK || seen)
}

// rawExpiry takes a seen or gossip id found on a raw page (new format only: the 8-byte old
// seen values cannot be told from inbox_id's). They are kept apart until the scan ends, so
// that inboxStale judges by the tree's seen set alone.
func (sv *salvage) rawExpiry(id string, v []byte) {
	if len(v) < 9 || uuid.Validate(id) != nil {
		return
	}
	set := map[byte]map[string]expiry{kindSeen: sv.rawSeen, kindGossip: sv.rawGsp}[v[8]]
	if set == nil {
		return
	}
	if exp, owner, err := decodeExpiry(v[8], v); err == nil {
		if old, ok := set[id]; !ok || exp.After(old.exp) {
			set[id] = expiry{exp, owner}
		}
	}
}

// later reports whether outbox record a is a later version than b.
func later(a, b *OutboxEntry) bool {
	return a.Attempts > b.Attempts || (a.Attempts == b.Attempts && a.NextAttemptAt.After(b.NextAttemptAt))
}

// rawOutbox decodes an outbox record keyed by k, or returns nil unless it is sound: it
// decodes, names k, and holds the IACP document of that message.
func rawOutbox(k, v []byte) *OutboxEntry {
	e, err := decodeOutbox(v)
	if err != nil || e.MessageID != string(k) || e.Recipient == "" || !docIs(e.Raw, e.MessageID) {
		return nil
	}
	return e
}

// rawInbox is rawOutbox for an inbox record keyed by its seq. A record whose message is in a
// file of its own is sound when the file holds that message; the file stays where it is, and
// the entry keeps naming it.
func (sv *salvage) rawInbox(k, v []byte) *InboxEntry {
	e, err := decodeInbox(v)
	if err != nil || e.Seq != beUint(k) || uuid.Validate(e.MessageID) != nil {
		return nil
	}
	raw := e.Raw
	if e.body != "" {
		if raw, err = sv.bodies.read(e.body, e.Size); err != nil {
			return nil
		}
	}
	if !docIs(raw, e.MessageID) {
		return nil
	}
	return e
}

func docIs(raw []byte, id string) bool {
	m, err := protocol.DecodeJSON(raw)
	return err == nil && m.Envelope.MessageID == id
}

// One commit of the recovered file carries at most recoverTxRecords records (1,000) and
// recoverTxBytes raw bytes (64 MiB), so that its dirty pages stay small in memory.
const (
	recoverTxRecords = 1000
	recoverTxBytes   = 64 << 20
)

// put is one write into the recovered file and the raw bytes it carries.
type put struct {
	size int
	fn   func(tx *bolt.Tx) error
}

// write stores what was salvaged in a new bbolt file at path, in commits of
// recoverTxRecords, and closes it (each commit is fsynced).
func (sv *salvage) write(path string, noSync bool) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: noSync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return err
	}
	out := renumber(slices.Collect(maps.Values(sv.outbox)), func(e *OutboxEntry) *uint64 { return &e.Seq })
	in := renumber(slices.Collect(maps.Values(sv.inbox)), func(e *InboxEntry) *uint64 { return &e.Seq })
	var puts []put
	for _, e := range out {
		puts = append(puts, put{len(e.Raw), func(tx *bolt.Tx) error { return putOutbox(tx, e) }})
	}
	for _, e := range in {
		puts = append(puts, put{len(e.Raw), func(tx *bolt.Tx) error { // a message in its file stays there
			v, err := encodeInbox(e)
			if err != nil {
				return err
			}
			return errors.Join(tx.Bucket(bktInbox).Put(be64(e.Seq), v), tx.Bucket(bktInboxID).Put([]byte(e.MessageID), be64(e.Seq)))
		}})
	}
	for _, set := range []struct {
		ids, exps []byte
		kind      byte
		m         map[string]expiry
	}{{bktSeen, bktSeenExp, kindSeen, sv.seen}, {bktGossip, bktGossipExp, kindGossip, sv.gossip}} {
		for id, x := range set.m {
			puts = append(puts, put{0, func(tx *bolt.Tx) error {
				return errors.Join(tx.Bucket(set.ids).Put([]byte(id), encodeExpiry(set.kind, x.exp, x.owner)),
					tx.Bucket(set.exps).Put(timeKey(x.exp, []byte(id)), nil))
			}})
		}
	}
	for id, v := range sv.approvals {
		puts = append(puts, put{len(v), func(tx *bolt.Tx) error { return tx.Bucket(bktApprovals).Put([]byte(id), v) }})
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range append(slices.Clone(allBuckets), bktApprovals) {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return errors.Join(setSequence(tx, bktOutbox, out, func(e *OutboxEntry) uint64 { return e.Seq }),
			setSequence(tx, bktInbox, in, func(e *InboxEntry) uint64 { return e.Seq }))
	})
	for len(puts) > 0 && err == nil {
		err = db.Update(func(tx *bolt.Tx) error {
			for n, size := 0, 0; len(puts) > 0 && n < recoverTxRecords && size < recoverTxBytes; n++ {
				if err := puts[0].fn(tx); err != nil {
					return err
				}
				size += puts[0].size
				puts = puts[1:]
			}
			return nil
		})
	}
	return errors.Join(err, db.Close())
}

// renumber sorts entries by seq and gives any entry whose seq an earlier one took a new
// seq after the largest, so that every seq stays unique and arrival order is kept.
func renumber[E any](es []E, seq func(E) *uint64) []E {
	slices.SortFunc(es, func(a, b E) int { return cmp.Compare(*seq(a), *seq(b)) })
	var top uint64
	for _, e := range es {
		top = max(top, *seq(e))
	}
	used := map[uint64]bool{}
	for _, e := range es {
		if s := seq(e); used[*s] || *s == 0 {
			top++
			*s = top
		}
		used[*seq(e)] = true
	}
	return es
}

// setSequence sets a bucket's NextSequence counter past every seq in es.
func setSequence[E any](tx *bolt.Tx, bucket []byte, es []E, seq func(E) uint64) error {
	var top uint64
	for _, e := range es {
		top = max(top, seq(e))
	}
	return tx.Bucket(bucket).SetSequence(top)
}
