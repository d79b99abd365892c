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

// Approve marks the held message id approved by by (not empty) at now and returns it; it
// stays held until Release, so that a crash before the outbox took it loses nothing. It
// returns ErrNotFound when no message id is held, and a held one approved before as it is.
func (s *Store) Approve(id, by string) (Approval, error) {
	if by == "" {
		return Approval{}, errors.New("store: approve: say who approves")
	}
	now := s.cfg.now()
	var got *Approval
	err := s.batch(func(tx *bolt.Tx) error {
		got = nil
		b := tx.Bucket(bktApprovals)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		a, err := decodeApproval(v)
		if err != nil {
			return fmt.Errorf("approval %s: %w", id, err)
		}
		got = a
		if a.Approved() {
			return nil
		}
		a.ApprovedBy, a.ApprovedAt = by, now
		nv, err := encodeApproval(a)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), nv)
	})
	if err == nil && got == nil {
		err = ErrNotFound
	}
	if err != nil {
		return Approval{}, s.wrap("approve", err)
	}
	return *got, nil
}

// Release removes the held message id and returns it: rejected, expired, or taken by the
// outbox once approved. Of concurrent callers for one id, one gets it; the others, and any
// caller when none is held, get ErrNotFound.
func (s *Store) Release(id string) (Approval, error) {
	var got *Approval
	err := s.batch(func(tx *bolt.Tx) error {
		got = nil
		b := tx.Bucket(bktApprovals)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		a, err := decodeApproval(v)
		if err != nil {
			return fmt.Errorf("approval %s: %w", id, err)
		}
		got = a
		return b.Delete([]byte(id))
	})
	if err == nil && got == nil {
		err = ErrNotFound
	}
	if err != nil {
		return Approval{}, s.wrap("release", err)
	}
	return *got, nil
}
