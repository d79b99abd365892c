package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// InboxEntry is one accepted inbound message the local agent has not yet taken.
type InboxEntry struct {
	// MessageID, From and To come from the envelope (sender and recipient agent ids).
	MessageID string
	From      string
	To        string
	// Peer is the sending peer (envelope.sender.peer_id), whose inbox share the message
	// counts against and who owns its seen id.
	Peer string
	// Raw is the signed document exactly as received, Size bytes long. Pending leaves it nil
	// for a message of BodyFileBytes or more, which the store keeps in a file of its own:
	// InboxRaw reads it.
	Raw  []byte
	Size int64
	// body names the message's file in bodies/ when the store record does not hold it.
	body string
	// Seq is the arrival order.
	Seq uint64
	// ReceivedAt is when Accept stored it; ExpiresAt is protocol.Message.Expires.
	ReceivedAt time.Time
	ExpiresAt  time.Time
}

// AcceptResult says what Accept did.
type AcceptResult struct {
	// Duplicate is true when the message id was accepted before and has not expired: nothing
	// was stored, the node acknowledges it again and does not hand it to the agent twice.
	Duplicate bool
	// Pending is true when the message is in the inbox now (always for a new message; for a
	// duplicate, whether the agent has not yet taken the first copy).
	Pending bool
	// Seq is the inbox arrival order of the message, when Pending.
	Seq uint64
}

// Accept stores an inbound message and records its id in the persistent seen set, both in
// one journal record (journal.go), before the node sends the receipt. When Accept returns nil
// the message is on disk (fsynced unless WithNoSync); bbolt receives it shortly after.
//
// A message id seen before and not yet expired is not stored again: the result has
// Duplicate set. Accept refuses a message whose id is not a UUID (PAYLOAD_INVALID), one
// already expired (TIMEOUT), and one that would push its sender's share of the inbox or the
// inbox itself past its limit (*QueueFullError with LimitSender or LimitInbox, RATE_LIMITED):
// the sender keeps it and retries. A refusal stores nothing and drops nothing.
//
// The sender is m.Envelope.Sender.PeerID, which the caller has verified is the authenticated
// remote peer; it is stored with the message and, as the owner, with its seen id.
func (s *Store) Accept(m *protocol.Message, raw []byte) (AcceptResult, error) {
	res, errs, err := s.AcceptAll([]*protocol.Message{m}, [][]byte{raw})
	if err != nil {
		return AcceptResult{}, err
	}
	return res[0], errs[0]
}

// AcceptAll is Accept for several messages at once, so that a burst read from one stream
// costs one journal write and one fsync (journal.go: a message is durable once its journal
// record is synced; bbolt receives it off the path). results[i] and errs[i] are ms[i]'s outcome (errs[i]
// is its own refusal: invalid id, expired, inbox full); err is a failure of the whole commit,
// after which nothing was stored.
func (s *Store) AcceptAll(ms []*protocol.Message, raws [][]byte) (results []AcceptResult, errs []error, err error) {
	now := s.cfg.now()
	results = make([]AcceptResult, len(ms))
	errs = make([]error, len(ms))
	entries := make([]*InboxEntry, len(ms))
	reserved := make([]int64, len(ms))
	for i, m := range ms {
		e := &InboxEntry{
			MessageID: m.Envelope.MessageID, From: m.Envelope.Sender.AgentID, To: m.Envelope.Recipient.AgentID,
			Peer: m.Envelope.Sender.PeerID, Raw: raws[i], Size: int64(len(raws[i])), ReceivedAt: now, ExpiresAt: m.Expires(),
		}
		if errs[i] = checkMessage(e.MessageID, e.To, e.ExpiresAt, now, len(raws[i])); errs[i] != nil {
			continue
		}
		if len(raws[i]) > protocol.MaxMessageBytesLimit {
			errs[i] = protocol.Errorf(protocol.CodePayloadInvalid, "store: message %s is %d bytes, more than the inbox takes (%d)", e.MessageID, len(raws[i]), protocol.MaxMessageBytesLimit)
			continue
		}
		if errs[i] = s.reserveInbox(e.Peer, int64(len(raws[i]))); errs[i] != nil {
			continue
		}
		entries[i], reserved[i] = e, int64(len(raws[i]))
	}
	for i, ferr := range s.bodies.create(entries) { // large messages, to files of their own
		if ferr != nil {
			errs[i] = ferr
			s.releaseInbox(entries[i].Peer, reserved[i])
			entries[i], reserved[i] = nil, 0
		}
	}
	w, lead, err := s.admit(entries, results, now)
	if err == nil && w != nil {
		err = s.writeJournal(w, lead)
		s.j.writers.Done()
	}
	for i := range entries {
		if reserved[i] > 0 && (err != nil || results[i].Duplicate) {
			s.releaseInbox(entries[i].Peer, reserved[i])
			s.bodies.remove(entries[i].body)
		}
	}
	if err != nil {
		return nil, nil, s.wrap("accept", err)
	}
	return results, errs, nil
}

func beUint(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// reserveInbox counts size against the sender's share and the inbox, or refuses it (the
// sender's share first, so that a peer flooding the inbox is told it is its own share).
func (s *Store) reserveInbox(sender string, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if q := s.inSender[sender]; q+size > s.cfg.maxSenderBytes {
		return &QueueFullError{Limit: LimitSender, Sender: sender, Queued: q, Max: s.cfg.maxSenderBytes, Size: size}
	}
	if s.inTotal+size > s.cfg.maxInboxBytes {
		return &QueueFullError{Limit: LimitInbox, Queued: s.inTotal, Max: s.cfg.maxInboxBytes, Size: size}
	}
	s.inTotal += size
	s.inSender[sender] += size
	return nil
}

func (s *Store) releaseInbox(sender string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inTotal -= size
	if s.inSender[sender] -= size; s.inSender[sender] <= 0 {
		delete(s.inSender, sender)
	}
}

// Pending returns every message accepted and not yet acknowledged, in arrival order: after
// a restart, what the local agent has still to take.
func (s *Store) Pending() ([]InboxEntry, error) {
	if err := s.applyReady(); err != nil {
		return nil, err
	}
	var out []InboxEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktInbox).ForEach(func(_, v []byte) error {
			e, err := decodeInbox(v)
			if err != nil {
				return err
			}
			out = append(out, *e)
			return nil
		})
	})
	return out, s.wrap("pending", err)
}

// Ack removes a message the local agent has taken. Its id stays in the seen set until the
// message expires, so a late retransmission is still a duplicate. Ack returns ErrNotFound if
// the message is not in the inbox (already acknowledged).
func (s *Store) Ack(id string) error {
	if journaled, err := s.ackJournaled(context.Background(), id, false); journaled {
		return s.wrap("ack", err)
	}
	return s.ack(id, s.batch)
}

// AckLazily is Ack as a lazy write (commit.go): the removal starts no commit of its own but
// rides in the next commit of another write (the journal's next apply, say), or commits on
// its own when none comes within DefaultLazyDelay or ctx ends. It returns once committed,
// except for a message the journal still holds (journal.go): that one is marked taken at
// once, and its apply stores only its seen id. For a caller
// that keeps its own record that the message was taken, which a restart goes by (the node's
// audit log: delivery.Engine.TakenLazily); without one, a removal lost in a crash offers the
// message again.
func (s *Store) AckLazily(ctx context.Context, id string) error {
	if journaled, err := s.ackJournaled(ctx, id, true); journaled {
		return s.wrap("ack", err)
	}
	return s.ack(id, func(fn func(*bolt.Tx) error) error { return s.batchLazy(ctx, fn) })
}

// ack removes the inbox entry of id through write (batch or batchLazy).
func (s *Store) ack(id string, write func(func(*bolt.Tx) error) error) error {
	var size int64
	var peer, body string
	var found bool
	err := write(func(tx *bolt.Tx) error {
		found, size, peer, body = false, 0, "", ""
		ids := tx.Bucket(bktInboxID)
		seq := ids.Get([]byte(id))
		if seq == nil {
			return nil
		}
		inbox := tx.Bucket(bktInbox)
		key := bytes.Clone(seq)
		if v := inbox.Get(key); v != nil {
			var m inboxMeta // the message is not copied: only its size and sender are needed
			raw, err := recordParts(v, &m)
			if err != nil {
				return fmt.Errorf("inbox record of %s: %w", id, err)
			}
			if m.Peer == "" {
				m.Peer = rawSenderPeer(raw)
			}
			size, peer, body = int64(len(raw)), m.Peer, m.Body
			if body != "" {
				size = m.Size
			}
		}
		found = true
		return errors.Join(inbox.Delete(key), ids.Delete([]byte(id)))
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	if err == nil {
		s.releaseInbox(peer, size)
		s.bodies.remove(body) // after the commit: a crash before leaves a file Open removes
	}
	return s.wrap("ack", err)
}

// InboxRaw returns the document of the inbox message id, which the agent has not taken, as
// received: from the journal while the message is only there, else from bbolt or its file
// (BodyFileBytes). It is ErrNotFound when no such message waits. The caller must not change
// what it gets.
func (s *Store) InboxRaw(id string) ([]byte, error) {
	s.j.mu.Lock()
	if je := s.j.pending[id]; je != nil && !je.acked {
		raw, body, size := je.e.Raw, je.e.body, je.e.Size
		s.j.mu.Unlock()
		if body != "" {
			return s.bodies.read(body, size)
		}
		return raw, nil
	}
	s.j.mu.Unlock()
	var raw []byte
	var m inboxMeta
	err := s.db.View(func(tx *bolt.Tx) error {
		seq := tx.Bucket(bktInboxID).Get([]byte(id))
		if seq == nil {
			return ErrNotFound
		}
		v := tx.Bucket(bktInbox).Get(seq)
		if v == nil {
			return ErrNotFound
		}
		r, err := recordParts(v, &m)
		if err == nil && m.Body == "" {
			raw = bytes.Clone(r)
		}
		return err
	})
	if err == nil && m.Body != "" {
		raw, err = s.bodies.read(m.Body, m.Size)
	}
	if err != nil {
		return nil, s.wrap("read inbox message", err)
	}
	return raw, nil
}
