package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// The records bucket keeps the durable state of what stands on the node (a workflow's steps,
// package workflow): opaque values under a kind and an id, bounded per kind and in size.
var bktRecords = []byte("records") // kind + 0x00 + id -> value

// Bounds of the records.
const (
	// MaxRecordBytes is the largest record.
	MaxRecordBytes = 1 << 20
	// MaxRecordsPerKind is how many records one kind may keep.
	MaxRecordsPerKind = 4096
	maxRecordKeyLen   = 256
)

func recordKey(kind, id string) ([]byte, error) {
	if kind == "" || id == "" || len(kind)+len(id) > maxRecordKeyLen || bytes.IndexByte([]byte(kind), 0) >= 0 || bytes.IndexByte([]byte(id), 0) >= 0 {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "record %q/%q: kind and id must be non-empty, without NUL, at most %d bytes together", kind, id, maxRecordKeyLen)
	}
	return append(append([]byte(kind), 0), id...), nil
}

// PutRecord stores v as the record id of kind, replacing any earlier one, and returns once it
// is committed. A record over MaxRecordBytes is refused (PAYLOAD_INVALID), as is a new one
// past MaxRecordsPerKind records of its kind (RATE_LIMITED: delete some first).
func (s *Store) PutRecord(kind, id string, v []byte) error {
	key, err := recordKey(kind, id)
	if err != nil {
		return err
	}
	if len(v) > MaxRecordBytes {
		return protocol.Errorf(protocol.CodePayloadInvalid, "record %s/%s is %d bytes; at most %d", kind, id, len(v), MaxRecordBytes)
	}
	var refusal error
	err = s.batch(func(tx *bolt.Tx) error {
		refusal = nil
		b, err := tx.CreateBucketIfNotExists(bktRecords)
		if err != nil {
			return err
		}
		if b.Get(key) == nil {
			if n := countPrefix(b, recordPrefix(kind)); n >= MaxRecordsPerKind {
				refusal = protocol.Errorf(protocol.CodeRateLimited, "the store keeps %d records of kind %s, its limit: delete finished ones first", n, kind)
				return nil
			}
		}
		return b.Put(key, v)
	})
	if err != nil {
		return s.wrap("put record", err)
	}
	return refusal
}

// Records returns every record of kind, by id.
func (s *Store) Records(kind string) (map[string][]byte, error) {
	out := map[string][]byte{}
	prefix := recordPrefix(kind)
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktRecords)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			out[string(k[len(prefix):])] = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("records", err)
	}
	return out, nil
}

// DeleteRecord removes a record (nothing when there is none) and returns once committed.
func (s *Store) DeleteRecord(kind, id string) error {
	key, err := recordKey(kind, id)
	if err != nil {
		return err
	}
	err = s.batch(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bktRecords); b != nil {
			return b.Delete(key)
		}
		return nil
	})
	if err != nil {
		return s.wrap(fmt.Sprintf("delete record %s/%s", kind, id), err)
	}
	return nil
}

func recordPrefix(kind string) []byte { return append([]byte(kind), 0) }

func countPrefix(b *bolt.Bucket, prefix []byte) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}
