package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A record is one version byte, a uvarint length, that many bytes of JSON metadata, then the
// raw signed message verbatim. Keeping the raw bytes outside the JSON avoids re-encoding the
// message (its signature covers the exact bytes the sender produced).
const recordVersion = 1

func encodeRecord(meta any, raw []byte) ([]byte, error) {
	return appendRecordBody(nil, meta, raw)
}

// appendRecordBody appends the record of meta and raw to dst (encodeRecord's bytes).
func appendRecordBody(dst []byte, meta any, raw []byte) ([]byte, error) {
	m, err := json.Marshal(meta)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, 1+binary.MaxVarintLen64+len(m)+len(raw))
	dst = append(dst, recordVersion)
	dst = binary.AppendUvarint(dst, uint64(len(m)))
	dst = append(dst, m...)
	return append(dst, raw...), nil
}

// decodeRecord fills meta and returns a copy of the raw bytes (bbolt's memory is only valid
// inside the transaction).
func decodeRecord(v []byte, meta any) ([]byte, error) {
	raw, err := recordParts(v, meta)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), raw...), nil
}

// recordParts fills meta and returns the raw bytes as a slice of v, not copied: for readers
// that only count or check them.
func recordParts(v []byte, meta any) ([]byte, error) {
	if len(v) < 2 || v[0] != recordVersion {
		return nil, errors.New("store: record has an unknown format version")
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || uint64(len(v)-1-k) < n {
		return nil, errors.New("store: record is truncated")
	}
	body := v[1+k:]
	if err := json.Unmarshal(body[:n], meta); err != nil {
		return nil, fmt.Errorf("store: record metadata: %w", err)
	}
	return body[n:], nil
}

// outboxMeta is the stored metadata of an OutboxEntry.
type outboxMeta struct {
	ID        string `json:"id"`
	Recipient string `json:"to"`
	Seq       uint64 `json:"seq"`
	Enqueued  int64  `json:"enq"`
	Expires   int64  `json:"exp"`
	Attempts  int    `json:"att,omitempty"`
	Backoff   int    `json:"bo,omitempty"` // absent in records written before it existed: 0
	Next      int64  `json:"next"`
	LastError string `json:"err,omitempty"`
}

func encodeOutbox(e *OutboxEntry) ([]byte, error) {
	return encodeRecord(outboxMeta{
		ID: e.MessageID, Recipient: e.Recipient, Seq: e.Seq,
		Enqueued: e.EnqueuedAt.UnixNano(), Expires: e.ExpiresAt.UnixNano(),
		Attempts: e.Attempts, Backoff: e.Backoff, Next: e.NextAttemptAt.UnixNano(), LastError: e.LastError,
	}, e.Raw)
}

func decodeOutbox(v []byte) (*OutboxEntry, error) {
	var m outboxMeta
	raw, err := decodeRecord(v, &m)
	if err != nil {
		return nil, err
	}
	return &OutboxEntry{
		MessageID: m.ID, Recipient: m.Recipient, Seq: m.Seq, Raw: raw,
		EnqueuedAt: time.Unix(0, m.Enqueued), ExpiresAt: time.Unix(0, m.Expires),
		Attempts: m.Attempts, Backoff: m.Backoff, NextAttemptAt: time.Unix(0, m.Next), LastError: m.LastError,
	}, nil
}

// inboxMeta is the stored metadata of an InboxEntry.
type inboxMeta struct {
	ID       string `json:"id"`
	From     string `json:"from"`
	To       string `json:"to"`
	Seq      uint64 `json:"seq"`
	Received int64  `json:"recv"`
	Expires  int64  `json:"exp"`
	// Peer is the authenticated sending peer; absent in records written before it existed.
	Peer string `json:"peer,omitempty"`
	// Body names the file in bodies/ that holds the message, of Size bytes, when the record
	// does not (bodies.go).
	Body string `json:"body,omitempty"`
	Size int64  `json:"size,omitempty"`
}

func encodeInbox(e *InboxEntry) ([]byte, error) { return appendInbox(nil, e) }

// appendInbox appends e's inbox record to dst.
func appendInbox(dst []byte, e *InboxEntry) ([]byte, error) {
	m := inboxMeta{
		ID: e.MessageID, From: e.From, To: e.To, Seq: e.Seq,
		Received: e.ReceivedAt.UnixNano(), Expires: e.ExpiresAt.UnixNano(), Peer: e.Peer,
	}
	if e.body != "" {
		m.Body, m.Size = e.body, e.Size
		return appendRecordBody(dst, m, nil)
	}
	return appendRecordBody(dst, m, e.Raw)
}

func decodeInbox(v []byte) (*InboxEntry, error) {
	var m inboxMeta
	raw, err := decodeRecord(v, &m)
	if err != nil {
		return nil, err
	}
	if m.Body != "" {
		raw = nil // the message is in its file (bodies.go)
	} else {
		m.Size = int64(len(raw))
	}
	if m.Peer == "" {
		m.Peer = rawSenderPeer(raw)
	}
	return &InboxEntry{
		MessageID: m.ID, From: m.From, To: m.To, Peer: m.Peer, Seq: m.Seq, Raw: raw, Size: m.Size, body: m.Body,
		ReceivedAt: time.Unix(0, m.Received), ExpiresAt: time.Unix(0, m.Expires),
	}, nil
}

// rawSenderPeer reads sender.peer_id from a raw document, for inbox records written before
// the record kept it; "" when the document has none.
func rawSenderPeer(raw []byte) string {
	var doc struct {
		Envelope struct {
			Sender struct {
				PeerID string `json:"peer_id"`
			} `json:"sender"`
		} `json:"envelope"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return ""
	}
	return doc.Envelope.Sender.PeerID
}

// Seen and gossip values: the expiry (8 bytes, Unix nanoseconds, big-endian), then a kind
// byte and the owner peer id. Seen values written before owners were kept are the 8 bytes
// alone. The kind byte tells the two sets apart when Recover scans raw pages.
const (
	kindSeen   byte = 's'
	kindGossip byte = 'g'
)

func encodeExpiry(kind byte, exp time.Time, owner string) []byte {
	v := make([]byte, 0, 9+len(owner))
	v = append(v, be64(uint64(exp.UnixNano()))...)
	return append(append(v, kind), owner...)
}

// decodeExpiry reads a seen or gossip value written with kind; an 8-byte value (the seen
// set's old format) has no owner.
func decodeExpiry(kind byte, v []byte) (exp time.Time, owner string, err error) {
	switch {
	case len(v) == 8:
		return keyTime(v), "", nil
	case len(v) < 9 || v[8] != kind:
		return time.Time{}, "", fmt.Errorf("store: expiry value of %d bytes has no kind %q", len(v), kind)
	}
	return keyTime(v), string(v[9:]), nil
}
