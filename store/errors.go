package store

import (
	"errors"
	"fmt"

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
