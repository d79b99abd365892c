package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// GenesisHash is the prev of the very first entry: 64 zeros.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Event says what happened to a message.
type Event string

// The events. A direct message normally appears as sent then delivered on the sending node,
// and as received then acked on the receiving node.
const (
	// EventSent: the node accepted a message from its agent and queued or sent it.
	EventSent Event = "sent"
	// EventDelivered: the recipient's node acknowledged the message (receipt).
	EventDelivered Event = "delivered"
	// EventReceived: the node accepted an inbound message for its agent.
	EventReceived Event = "received"
	// EventAcked: the local agent took the inbound message.
	EventAcked Event = "acked"
	// EventRefused: a message was refused, inbound or outbound; Code says why. Input the
	// node refuses or cannot authenticate is recorded with Refusal: no payload, no field of
	// the document, only who sent it, its size and its hash.
	EventRefused Event = "refused"
	// EventExpired: a queued message reached its TTL undelivered (Code TIMEOUT); also one
	// that reached it while it waited for approval (Reason says so).
	EventExpired Event = "expired"
	// EventCancelled: a queued message was taken out of the outbox before its delivery: its
	// sender cancelled it (DELETE /v1/outbox/{id}), or the caller of a request stopped
	// waiting for its answer. It is not sent again.
	EventCancelled Event = "cancelled"
	// EventHeld: the node held an outgoing message that requires approval
	// (security.require_approval); it is not sent until approved.
	EventHeld Event = "held"
	// EventApproved: a held message was approved; By says who. It goes to the outbox next.
	EventApproved Event = "approved"
	// EventRejected: a held message was rejected and dropped unsent (Code PERMISSION_DENIED);
	// By says who, Reason why.
	EventRejected Event = "rejected"
	// EventRecovered: written by Open itself when it dropped an incomplete last line left
	// by a crash; Reason says how many bytes and their hash.
	EventRecovered Event = "recovered"
	// EventRetention: written by the Log before it removes its oldest files (MaxTotalBytes,
	// MaxAge); Retention lists them and the anchor the first kept line chains from.
	EventRetention Event = "retention"
	// EventChainBroken: written by Open as the first entry of a new file when the last file's
	// chain did not hold; Reason is the ChainError, Prev the hash of the damaged file's last
	// complete line. It starts a new segment of the chain (see Verify).
	EventChainBroken Event = "chain_broken"
)

// Entry is one line of the audit log. Append fills Seq, Prev and (when zero) Time.
//
// A message the node accepted is recorded with FromMessage. Input the node refuses or cannot
// authenticate is recorded with Refusal instead: the authenticated peer it came from, its
// size and SHA-256, the code and a clipped reason, and never its payload or any field read
// from the unauthenticated document, so that a peer cannot write into the log what it likes,
// nor fill the disk with it.
type Entry struct {
	// Seq numbers entries from 1, without gaps, across files.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Event is what happened.
	Event Event `json:"event"`
	// MessageID, CorrelationID, Type, Intent, From and To come from the envelope.
	MessageID     string `json:"message_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Type          string `json:"type,omitempty"`
	Intent        string `json:"intent,omitempty"`
	From          string `json:"from,omitempty"`
	To            string `json:"to,omitempty"`
	// Code is the IACP error code of a refused or expired message.
	Code protocol.Code `json:"code,omitempty"`
	// Reason is a human-readable detail (the error text of a refusal).
	Reason string `json:"reason,omitempty"`
	// By is who approved or rejected a held message (EventApproved, EventRejected), as the
	// operator named themself to the local API.
	By string `json:"by,omitempty"`
	// Payload is the message payload, verbatim JSON; with WithOmitPayloads it is left out
	// and PayloadSHA256, the hex SHA-256 of the payload bytes, is recorded instead.
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadSHA256 string          `json:"payload_sha256,omitempty"`
	// Peer is the authenticated libp2p peer id that input came from (refusals).
	Peer string `json:"peer,omitempty"`
	// Size is the length in bytes of the document as received, and SHA256 the hex SHA-256
	// of those bytes (refusals).
	Size   int    `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Suppressed counts the further refusals from the same peer that were not written since
	// the previous refusal entry for it (the node rate-limits refusal entries per peer).
	Suppressed int `json:"suppressed,omitempty"`
	// Retention describes the files an EventRetention entry removes.
	Retention *RetentionInfo `json:"retention,omitempty"`
	// Prev is the hex SHA-256 of the previous line (GenesisHash for the first).
	Prev string `json:"prev"`
}

// RetentionInfo is what an EventRetention entry records about the files it removes.
type RetentionInfo struct {
	// FirstSeq and LastSeq are the range of seqs the removed files held.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Anchor is the hash of the last removed line: the prev of the first line kept.
	Anchor string `json:"anchor"`
	// Files are the removed files, oldest first.
	Files []RemovedFile `json:"files"`
}

// RemovedFile is one file removed by retention.
type RemovedFile struct {
	// Name is the file's base name, Size its length and SHA256 the hex SHA-256 of its bytes.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// FirstSeq and LastSeq are the seqs of its first and last lines; LastHash is the hash of
	// its last line, which the next file's first line chains from.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	LastHash string `json:"last_hash"`
	// Why is RetainedForBytes or RetainedForAge.
	Why string `json:"why"`
}

// Why a file was removed (RemovedFile.Why).
const (
	// RetainedForBytes: the files together were over MaxTotalBytes.
	RetainedForBytes = "bytes"
	// RetainedForAge: the file's newest entry was older than MaxAge.
	RetainedForAge = "age"
)

// FromMessage returns an entry for event about m, with the envelope fields and payload
// filled in. Set Code and Reason for refused and expired events.
func FromMessage(event Event, m *protocol.Message) Entry {
	return Entry{
		Event:         event,
		MessageID:     m.Envelope.MessageID,
		CorrelationID: m.Envelope.CorrelationID,
		Type:          string(m.Message.Type),
		Intent:        string(m.Message.Intent),
		From:          m.Envelope.Sender.AgentID,
		To:            m.Envelope.Recipient.AgentID,
		Payload:       m.Message.Payload,
	}
}

// hashLine is the chain hash of one line (without its newline).
func hashLine(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}
