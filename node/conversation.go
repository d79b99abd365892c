package node

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
)

// MaxConversationEntries bounds what one Conversation call returns.
const MaxConversationEntries = 10000

// ConversationEntry is one thing that happened to a message of a conversation, as the audit
// log recorded it: the message sent, delivered, received, acknowledged by the agent, refused
// or expired.
type ConversationEntry struct {
	// Seq is the audit log's sequence number: ask for entries after it to follow on.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Event is sent, delivered, received, acked, refused or expired.
	Event         string `json:"event"`
	MessageID     string `json:"message_id"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Type          string `json:"type,omitempty"`
	Intent        string `json:"intent,omitempty"`
	From          string `json:"from,omitempty"`
	To            string `json:"to,omitempty"`
	// Code and Reason say why a message was refused or expired.
	Code   protocol.Code `json:"code,omitempty"`
	Reason string        `json:"reason,omitempty"`
	// Payload is the message's payload; with audit_payloads off, PayloadSHA256 instead.
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadSHA256 string          `json:"payload_sha256,omitempty"`
}

// ErrNoAuditLog is Conversation's error on a node without the audit log, which conversations
// are read from.
var ErrNoAuditLog = errors.New("conversations are read from the audit log, which is off: set audit: true")

// Conversation lists conversation id as this node's audit log recorded it, oldest first: every
// message whose message_id or correlation_id is id, then every message correlated to one of
// those (its answers, and theirs). So an IACP correlation id, an ElizaOS reply_with or
// conversation_id, an ACP v2 correlationId or command id (one that is a UUID: another lives
// in the dialect extension only), or the message_id of the request that began it all name
// the same conversation. Only entries after seq after are returned,
// at most limit (1 to MaxConversationEntries); more reports that others follow.
//
// It reads the whole log (bounded by audit_max_bytes), so it costs a scan of it.
func (n *Node) Conversation(ctx context.Context, id string, after uint64, limit int) (entries []ConversationEntry, more bool, err error) {
	if id == "" || len(id) > protocol.MaxCorrelationIDLen {
		return nil, false, protocol.Errorf(protocol.CodePayloadInvalid, "a conversation id is 1 to %d characters", protocol.MaxCorrelationIDLen)
	}
	limit = min(max(limit, 1), MaxConversationEntries)
	members := map[string]bool{id: true}
	errFull := errors.New("page full")
	err = n.durable.tail(ctx, func(e audit.Entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.MessageID == "" || !(members[e.MessageID] || (e.CorrelationID != "" && members[e.CorrelationID])) {
			return nil
		}
		members[e.MessageID] = true
		if e.Seq <= after {
			return nil
		}
		if len(entries) == limit {
			more = true
			return errFull
		}
		entries = append(entries, conversationEntry(e))
		return nil
	})
	if errors.Is(err, errFull) {
		err = nil
	}
	return entries, more, err
}

func conversationEntry(e audit.Entry) ConversationEntry {
	return ConversationEntry{Seq: e.Seq, Time: e.Time, Event: string(e.Event), MessageID: e.MessageID,
		CorrelationID: e.CorrelationID, Type: e.Type, Intent: e.Intent, From: e.From, To: e.To,
		Code: e.Code, Reason: e.Reason, Payload: e.Payload, PayloadSHA256: e.PayloadSHA256}
}
