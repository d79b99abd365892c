package store

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// Approvals: outgoing messages held until a human approves or rejects them (ACP v2's
// requireApproval, docs/coordination.md "Approval"). A held message is in the approvals
// bucket only, never in the outbox: nothing sends or retries it. The bucket is created by the
// first Hold, so a store that never held a message has none.
var bktApprovals = []byte("approvals") // message id -> approval record

// Approval is one held outgoing message.
type Approval struct {
	// MessageID, From, To, Type and Intent come from the envelope and message.
	MessageID string
	From      string
	To        string
	Type      string
	Intent    string
	// Raw is the signed document, sent exactly so once approved.
	Raw []byte
	// HeldAt is when Hold stored it; ExpiresAt is protocol.Message.Expires: past it the
	// message is dropped unsent (TIMEOUT).
	HeldAt    time.Time
	ExpiresAt time.Time
	// ApprovedBy and ApprovedAt are set by Approve: the message is approved and waits only
	// for the outbox to take it (Release).
	ApprovedBy string
	ApprovedAt time.Time
}

// Approved reports whether a human approved a (it waits for the outbox, not for a decision).
func (a *Approval) Approved() bool { return a.ApprovedBy != "" }

// ApprovalLimits bound what may wait for approval.
type ApprovalLimits struct {
	// MaxCount is how many messages may wait at once; MaxBytes their raw bytes together.
	MaxCount int
	MaxBytes int64
}

// ErrApprovalsFull is matched (errors.Is) by the *ApprovalsFullError Hold returns.
var ErrApprovalsFull = errors.New("store: too many messages wait for approval")

// ApprovalsFullError says that Hold refused a message because the approvals are at a limit.
// It matches ErrApprovalsFull and protocol.ErrRateLimited (RATE_LIMITED).
type ApprovalsFullError struct {
	// Held and HeldBytes are what waits; Limits the bounds; Size the refused message's size.
	Held      int
	HeldBytes int64
	Limits    ApprovalLimits
	Size      int
}

func (e *ApprovalsFullError) Error() string {
	return fmt.Sprintf("store: approvals full: %d messages (%d bytes) wait for approval, the limit is %d messages and %d bytes; "+
		"this one is %d bytes: approve or reject some (`iacp-node approvals`), or raise approval_max / approval_max_bytes",
		e.Held, e.HeldBytes, e.Limits.MaxCount, e.Limits.MaxBytes, e.Size)
}

// Unwrap lets errors.Is match ErrApprovalsFull and protocol.ErrRateLimited.
func (e *ApprovalsFullError) Unwrap() []error {
	return []error{ErrApprovalsFull, &protocol.Error{Code: protocol.CodeRateLimited, Message: e.Error()}}
}

// approvalMeta is the stored metadata of an Approval; the raw document follows it.
type approvalMeta struct {
	ID         string `json:"id"`
	From       string `json:"from"`
	To         string `json:"to"`
	Type       string `json:"type,omitempty"`
	Intent     string `json:"intent,omitempty"`
	Held       int64  `json:"held"`
	Expires    int64  `json:"exp"`
	ApprovedBy string `json:"by,omitempty"`
	ApprovedAt int64  `json:"at,omitempty"`
}

func encodeApproval(a *Approval) ([]byte, error) {
	m := approvalMeta{ID: a.MessageID, From: a.From, To: a.To, Type: a.Type, Intent: a.Intent,
		Held: a.HeldAt.UnixNano(), Expires: a.ExpiresAt.UnixNano(), ApprovedBy: a.ApprovedBy}
	if a.Approved() {
		m.ApprovedAt = a.ApprovedAt.UnixNano()
	}
	return encodeRecord(m, a.Raw)
}

func decodeApproval(v []byte) (*Approval, error) {
	var m approvalMeta
	raw, err := decodeRecord(v, &m)
	if err != nil {
		return nil, err
	}
	a := &Approval{MessageID: m.ID, From: m.From, To: m.To, Type: m.Type, Intent: m.Intent, Raw: raw,
		HeldAt: time.Unix(0, m.Held), ExpiresAt: time.Unix(0, m.Expires), ApprovedBy: m.ApprovedBy}
	if m.ApprovedAt != 0 {
		a.ApprovedAt = time.Unix(0, m.ApprovedAt)
	}
	return a, nil
}

// Hold stores a for approval, unless the approvals are at a limit (*ApprovalsFullError,
// RATE_LIMITED), its id is held already (DUPLICATE), or it is invalid or expired (as Put
// refuses it: PAYLOAD_INVALID, TIMEOUT). HeldAt is set to now. It returns once committed.
func (s *Store) Hold(a Approval, lim ApprovalLimits) error {
	now := s.cfg.now()
	if err := checkMessage(a.MessageID, a.To, a.ExpiresAt, now, len(a.Raw)); err != nil {
		return err
	}
	a.HeldAt, a.ApprovedBy, a.ApprovedAt = now, "", time.Time{}
	v, err := encodeApproval(&a)
	if err != nil {
		return err
	}
	var refusal error
	err = s.batch(func(tx *bolt.Tx) error {
		refusal = nil
		b, err := tx.CreateBucketIfNotExists(bktApprovals)
		if err != nil {
			return err
		}
		if b.Get([]byte(a.MessageID)) != nil {
			refusal = protocol.Errorf(protocol.CodeDuplicate, "message %s already waits for approval", a.MessageID)
			return nil
		}
		var held int
		var bytes int64
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			held++
			bytes += int64(len(v))
		}
		if held+1 > lim.MaxCount || bytes+int64(len(v)) > lim.MaxBytes {
			refusal = &ApprovalsFullError{Held: held, HeldBytes: bytes, Limits: lim, Size: len(a.Raw)}
			return nil
		}
		return b.Put([]byte(a.MessageID), v)
	})
	if err != nil {
		return s.wrap("hold", err)
	}
	return refusal
}

// Held returns every held message, approved ones (waiting for the outbox) included, in no
// particular order.
func (s *Store) Held() ([]Approval, error) {
	var out []Approval
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktApprovals)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			a, err := decodeApproval(v)
			if err != nil {
				return fmt.Errorf("approval %q: %w", k, err)
			}
			out = append(out, *a)
			return nil
		})
	})
	return out, s.wrap("held", err)
}

// ErrApproved is returned by Discard for a message already approved: it is on its way to the
// outbox and can no longer be rejected.
var ErrApproved = errors.New("store: the message is approved already")

// Approve marks the held message id approved by by (not empty) at now and returns it, and
// whether this call approved it (false when it was approved before, by whoever the record
// names); it stays held until Release, so that a crash before the outbox took it loses
// nothing. It returns ErrNotFound when no message id is held, and TIMEOUT for a waiting one
// whose expiry passed (the caller drops it with Discard).
func (s *Store) Approve(id, by string) (_ Approval, fresh bool, _ error) {
	if by == "" {
		return Approval{}, false, errors.New("store: approve: say who approves")
	}
	now := s.cfg.now()
	var got *Approval
	var refusal error
	err := s.batch(func(tx *bolt.Tx) error {
		got, fresh, refusal = nil, false, nil
		a, err := getApproval(tx, id)
		if a == nil || err != nil {
			return err
		}
		got = a
		switch {
		case a.Approved():
			return nil
		case !a.ExpiresAt.After(now):
			refusal = protocol.Errorf(protocol.CodeTimeout, "message %s expired at %s while it waited for approval", id, a.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		}
		a.ApprovedBy, a.ApprovedAt, fresh = by, now, true
		nv, err := encodeApproval(a)
		if err != nil {
			return err
		}
		return tx.Bucket(bktApprovals).Put([]byte(id), nv)
	})
	switch {
	case err == nil && got == nil:
		err = ErrNotFound
	case err == nil && refusal != nil:
		return *got, false, refusal
	}
	if err != nil {
		return Approval{}, false, s.wrap("approve", err)
	}
	return *got, fresh, nil
}

// getApproval reads the held message id in tx; nil when none is held.
func getApproval(tx *bolt.Tx, id string) (*Approval, error) {
	b := tx.Bucket(bktApprovals)
	if b == nil {
		return nil, nil
	}
	v := b.Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	a, err := decodeApproval(v)
	if err != nil {
		return nil, fmt.Errorf("approval %s: %w", id, err)
	}
	return a, nil
}

// Release removes the held message id and returns it: taken by the outbox once approved, or
// dropped. Of concurrent callers for one id, one gets it; the others, and any caller when
// none is held, get ErrNotFound.
func (s *Store) Release(id string) (Approval, error) { return s.release(id, false) }

// Discard is Release for a message that still waits for a decision (rejected, or expired):
// one approved already is left alone, ErrApproved.
func (s *Store) Discard(id string) (Approval, error) { return s.release(id, true) }

func (s *Store) release(id string, waiting bool) (Approval, error) {
	var got *Approval
	var refusal error
	err := s.batch(func(tx *bolt.Tx) error {
		got, refusal = nil, nil
		a, err := getApproval(tx, id)
		if a == nil || err != nil {
			return err
		}
		got = a
		if waiting && a.Approved() {
			refusal = ErrApproved
			return nil
		}
		return tx.Bucket(bktApprovals).Delete([]byte(id))
	})
	if err == nil && got == nil {
		err = ErrNotFound
	}
	if err == nil && refusal != nil {
		return *got, refusal
	}
	if err != nil {
		return Approval{}, s.wrap("release", err)
	}
	return *got, nil
}
