package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/iacp-node/iacp-node/protocol"
)

// ErrNotFound is returned by Reschedule, Ack and Get when no entry has the given message id:
// it was delivered, taken or expired meanwhile, which callers usually treat as done.
var ErrNotFound = errors.New("store: no entry with this message id")

// ErrQueueFull is matched (errors.Is) by every *QueueFullError that Put and Accept return
// when a byte limit would be exceeded. Such an error also matches protocol.ErrRateLimited,
// so protocol.CodeOf reports RATE_LIMITED.
var ErrQueueFull = errors.New("store: queue full")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("store: closed")

// ErrCorrupt is matched (errors.Is) by the *CorruptError that Open returns when the store
// file is damaged: a page, a meta page or a record that cannot be read. Open never panics on
// a damaged file; the node stops with this error and the operator runs Check and Recover
// (`iacp-node store check` and `store recover`).
var ErrCorrupt = errors.New("store: file is damaged")

// ErrLocked is returned by Open, Check and Recover when another process holds the store's
// file lock after the lock timeout: a node is running on this data directory.
var ErrLocked = errors.New("store: the file is locked by another process")

// errLockTimeout is lockFile's timeout, which callers turn into ErrLocked with the path.
var errLockTimeout = errors.New("store: timed out waiting for the file lock")

// CorruptError says that the store file is damaged, where, and what to do.
type CorruptError struct {
	// Path is the damaged file.
	Path string
	// Problems lists what was found, at least one.
	Problems []Problem
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: %s is damaged: ", e.Path)
	if len(e.Problems) > 0 {
		b.WriteString(e.Problems[0].String())
	}
	if n := len(e.Problems) - 1; n > 0 {
		fmt.Fprintf(&b, " (and %d more problems)", n)
	}
	fmt.Fprintf(&b, ". The node cannot use it. With the node stopped, run "+
		"'iacp-node store check --data-dir D' to list the damage and "+
		"'iacp-node store recover --data-dir D' to copy every readable message into a new store "+
		"(the damaged file is kept beside it as %s.damaged-<time>), where D is the data directory "+
		"that holds %s", FileName, filepath.Dir(e.Path))
	return b.String()
}

// Unwrap lets errors.Is match ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Limit names which bound a QueueFullError hit.
type Limit string

// The bounds a Put or Accept can hit.
const (
	// LimitRecipient is the per-recipient bound of outbox bytes (WithMaxRecipientBytes).
	LimitRecipient Limit = "per-recipient outbox"
	// LimitTotal is the bound of all outbox bytes (WithMaxTotalBytes).
	LimitTotal Limit = "total outbox"
	// LimitInbox is the bound of inbox bytes (WithMaxInboxBytes).
	LimitInbox Limit = "inbox"
	// LimitSender is one sending peer's share of the inbox (WithMaxSenderInboxBytes).
	LimitSender Limit = "per-sender inbox"
)

// QueueFullError says that a message was refused because storing it would exceed a limit.
// Nothing already stored was dropped. It matches ErrQueueFull and protocol.ErrRateLimited.
type QueueFullError struct {
	// Limit is the bound that was hit.
	Limit Limit
	// Recipient is the recipient agent id for LimitRecipient, else "".
	Recipient string
	// Sender is the sending peer id for LimitSender, else "".
	Sender string
	// Queued is how many bytes were stored under that bound; Max is the bound; Size is the
	// size of the refused message.
	Queued, Max, Size int64
}

func (e *QueueFullError) Error() string {
	who := ""
	switch {
	case e.Recipient != "":
		who = " for " + e.Recipient
	case e.Sender != "":
		who = " of sender " + e.Sender
	}
	return fmt.Sprintf("store: %s queue full%s: %d of %d bytes used, message is %d bytes; "+
		"retry after deliveries drain the queue, or raise the limit", e.Limit, who, e.Queued, e.Max, e.Size)
}

// Unwrap lets errors.Is match ErrQueueFull and protocol.ErrRateLimited.
func (e *QueueFullError) Unwrap() []error {
	return []error{ErrQueueFull, &protocol.Error{Code: protocol.CodeRateLimited, Message: e.Error()}}
}

// wrap maps bbolt's closed-database error to ErrClosed and names the operation.
func (s *Store) wrap(op string, err error) error {
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrClosed):
		return err
	case errors.Is(err, bolterrors.ErrDatabaseNotOpen):
		return ErrClosed
	}
	return fmt.Errorf("store: %s: %w", op, err)
}
