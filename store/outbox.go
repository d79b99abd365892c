package store

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// OutboxEntry is one outgoing direct message waiting for its receipt.
type OutboxEntry struct {
	// MessageID is envelope.message_id; Recipient is envelope.recipient.agent_id.
	MessageID string
	Recipient string
	// Raw is the signed JSON document exactly as it goes on the wire. List leaves it nil.
	Raw []byte
	// Seq is the enqueue order, unique and increasing for the life of the file.
	Seq uint64
	// EnqueuedAt is when Put stored it; ExpiresAt is protocol.Message.Expires
	// (timestamp + ttl_seconds).
	EnqueuedAt time.Time
	ExpiresAt  time.Time
	// Attempts counts the failed delivery attempts recorded by Reschedule, for reports.
	Attempts int
	// Backoff counts the failed attempts since the recipient was last seen: Reschedule adds
	// one, RetryNow (the recipient is back) sets it to 0. The retry delay grows with it, so
	// a recipient that returns is retried from the shortest delay again.
	Backoff int
	// NextAttemptAt is when Due returns the entry next; Put sets it to EnqueuedAt.
	NextAttemptAt time.Time
	// LastError is the error of the last failed attempt, "" before the first.
	LastError string
}

// Size is the number of bytes the entry counts against the limits: the raw document.
func (e *OutboxEntry) Size() int64 { return int64(len(e.Raw)) }

func dueKey(t time.Time, seq uint64) []byte { return timeKey(t, be64(seq)) }

func rcptKey(recipient string, seq uint64) []byte {
	k := make([]byte, 0, len(recipient)+9)
	k = append(append(k, recipient...), 0)
	return append(k, be64(seq)...)
}

func rcptPrefix(recipient string) []byte { return append([]byte(recipient), 0) }

// Put stores an outgoing message before it is first sent. When Put returns nil the entry is
// committed (and fsynced unless WithNoSync), so it survives a crash. The entry is due at
// once (NextAttemptAt = now).
//
// Put refuses, storing nothing and dropping nothing: a message whose id is not a UUID or
// whose recipient is empty (PAYLOAD_INVALID), one already expired (TIMEOUT), and one that
// would push the recipient's or the total queued bytes past their limits (*QueueFullError,
// which matches ErrQueueFull and protocol.ErrRateLimited). Putting an id that is already
// queued is a no-op that returns nil, so a caller may retry a Put whose result it lost.
func (s *Store) Put(m *protocol.Message, raw []byte) error {
	p, err := s.PreparePut(m, raw)
	if err != nil {
		return err
	}
	return p.Commit()
}

// PreparedPut is an outgoing message that PreparePut checked and counted against the limits
// but did not store. Exactly one of its methods must be called, once: until then its bytes
// count against the limits.
type PreparedPut interface {
	// Commit stores the message and returns what Put returns after its checks: nil once it
	// is committed (and fsynced unless WithNoSync), or the failure of the commit. It gives
	// the bytes back when the commit fails or finds the id queued already.
	Commit() error
	// Abandon gives the bytes back and stores nothing: for a message whose recipient
	// acknowledged (or refused) it before it needed to be stored.
	Abandon()
}

// PreparePut is Put in two steps. It checks m and counts it against the limits, and refuses
// it as Put does, storing nothing; the PreparedPut's Commit then stores it. Put is
// PreparePut followed by Commit. A caller may send m on the wire before or while it commits
// (delivery.Engine.Send does), and tells its agent that m is queued only once Commit
// returned nil.
func (s *Store) PreparePut(m *protocol.Message, raw []byte) (PreparedPut, error) {
	now := s.cfg.now()
	e := &OutboxEntry{
		MessageID: m.Envelope.MessageID, Recipient: m.Envelope.Recipient.AgentID,
		Raw: raw, EnqueuedAt: now, ExpiresAt: m.Expires(), NextAttemptAt: now,
	}
	if err := checkMessage(e.MessageID, e.Recipient, e.ExpiresAt, now, len(raw)); err != nil {
		return nil, err
	}
	if err := s.reserveOutbox(e.Recipient, e.Size()); err != nil {
		return nil, err
	}
	return &preparedPut{s: s, e: e}, nil
}

// preparedPut is the store's PreparedPut: e's bytes are reserved.
type preparedPut struct {
	s *Store
	e *OutboxEntry
}

// Commit stores e (PreparedPut.Commit).
func (p *preparedPut) Commit() error {
	s, e := p.s, p.e
	var existed bool
	err := s.batch(func(tx *bolt.Tx) error {
		existed = false
		b := tx.Bucket(bktOutbox)
		if b.Get([]byte(e.MessageID)) != nil {
			existed = true
			return nil
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		e.Seq = seq
		return putOutbox(tx, e)
	})
	if err != nil || existed {
		s.releaseOutbox(e.Recipient, e.Size())
	}
	return s.wrap("put", err)
}

// Abandon gives e's bytes back (PreparedPut.Abandon).
func (p *preparedPut) Abandon() { p.s.releaseOutbox(p.e.Recipient, p.e.Size()) }

func checkMessage(id, recipient string, expires, now time.Time, size int) error {
	if _, err := uuid.Parse(id); err != nil {
		return protocol.Errorf(protocol.CodePayloadInvalid, "store: message_id %q is not a UUID", id)
	}
	if recipient == "" || strings.IndexByte(recipient, 0) >= 0 {
		return protocol.Errorf(protocol.CodePayloadInvalid, "store: message %s has no valid recipient agent id", id)
	}
	if size == 0 {
		return protocol.Errorf(protocol.CodePayloadInvalid, "store: message %s has no raw bytes", id)
	}
	if expires.IsZero() {
		return protocol.Errorf(protocol.CodePayloadInvalid, "store: message %s has no parseable timestamp, so no expiry", id)
	}
	if !expires.After(now) {
		return protocol.Errorf(protocol.CodeTimeout, "store: message %s expired at %s", id, expires.UTC().Format(time.RFC3339))
	}
	return nil
}

func (s *Store) reserveOutbox(recipient string, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if q := s.outRcpt[recipient]; q+size > s.cfg.maxRecipientBytes {
		return &QueueFullError{Limit: LimitRecipient, Recipient: recipient, Queued: q, Max: s.cfg.maxRecipientBytes, Size: size}
	}
	if s.outTotal+size > s.cfg.maxTotalBytes {
		return &QueueFullError{Limit: LimitTotal, Queued: s.outTotal, Max: s.cfg.maxTotalBytes, Size: size}
	}
	s.outRcpt[recipient] += size
	s.outTotal += size
	return nil
}

func (s *Store) releaseOutbox(recipient string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outTotal -= size
	if s.outRcpt[recipient] -= size; s.outRcpt[recipient] <= 0 {
		delete(s.outRcpt, recipient)
	}
}

func putOutbox(tx *bolt.Tx, e *OutboxEntry) error {
	v, err := encodeOutbox(e)
	if err != nil {
		return err
	}
	id := []byte(e.MessageID)
	return errors.Join(
		tx.Bucket(bktOutbox).Put(id, v),
		tx.Bucket(bktOutDue).Put(dueKey(e.NextAttemptAt, e.Seq), id),
		tx.Bucket(bktOutExp).Put(dueKey(e.ExpiresAt, e.Seq), id),
		tx.Bucket(bktOutRcpt).Put(rcptKey(e.Recipient, e.Seq), id),
	)
}

func deleteOutbox(tx *bolt.Tx, e *OutboxEntry) error {
	return errors.Join(
		tx.Bucket(bktOutbox).Delete([]byte(e.MessageID)),
		tx.Bucket(bktOutDue).Delete(dueKey(e.NextAttemptAt, e.Seq)),
		tx.Bucket(bktOutExp).Delete(dueKey(e.ExpiresAt, e.Seq)),
		tx.Bucket(bktOutRcpt).Delete(rcptKey(e.Recipient, e.Seq)),
	)
}

func getOutbox(tx *bolt.Tx, id []byte) (*OutboxEntry, error) {
	v := tx.Bucket(bktOutbox).Get(id)
	if v == nil {
		return nil, nil
	}
	return decodeOutbox(v)
}

// Get returns the queued entry with this message id, or ErrNotFound.
func (s *Store) Get(id string) (OutboxEntry, error) {
	var out *OutboxEntry
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, err = getOutbox(tx, []byte(id))
		return err
	})
	if err == nil && out == nil {
		err = ErrNotFound
	}
	if err != nil {
		return OutboxEntry{}, s.wrap("get", err)
	}
	return *out, nil
}

// ForRecipient returns every entry queued for recipient, oldest first.
func (s *Store) ForRecipient(recipient string) ([]OutboxEntry, error) {
	var out []OutboxEntry
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, err = forRecipient(tx, recipient)
		return err
	})
	return out, s.wrap("for recipient", err)
}

func forRecipient(tx *bolt.Tx, recipient string) ([]OutboxEntry, error) {
	var out []OutboxEntry
	prefix := rcptPrefix(recipient)
	c := tx.Bucket(bktOutRcpt).Cursor()
	for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, id = c.Next() {
		e, err := getOutbox(tx, id)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	return out, nil
}

// List returns every queued entry, oldest first, without Raw (use Get for the document):
// what the `outbox` command shows (for whom, since when, until when, attempts).
func (s *Store) List() ([]OutboxEntry, error) {
	var out []OutboxEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktOutbox).ForEach(func(_, v []byte) error {
			e, err := decodeOutbox(v)
			if err != nil {
				return err
			}
			e.Raw = nil
			out = append(out, *e)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b OutboxEntry) int { return int64Cmp(int64(a.Seq), int64(b.Seq)) })
	return out, s.wrap("list", err)
}

func int64Cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
