package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
)

// shownRequest is a request from agent from, correlated to the conversation c, expiring in
// an hour.
func shownRequest(id, from, c string) *protocol.Message {
	m := &protocol.Message{}
	m.Envelope.MessageID, m.Envelope.CorrelationID = id, c
	m.Envelope.Sender.AgentID = from
	m.Envelope.Timestamp = time.Now().UTC().Format(time.RFC3339Nano)
	m.Envelope.TTLSeconds = 3600
	m.Message.Type = protocol.TypeRequest
	return m
}

func answer(to, correlation string) *protocol.Message {
	m := &protocol.Message{}
	m.Envelope.Recipient.AgentID, m.Envelope.CorrelationID = to, correlation
	m.Message.Type = protocol.TypeResponse
	return m
}

// An answer naming a reply_with two senders' requests share is correlated only for the
// sender it names, and never addressed by the book: a peer cannot draw another's answer to
// itself by reusing its conversation id.
func TestAnswerBook_SharedReplyWithNeedsTheRecipient(t *testing.T) {
	b, now := newAnswerBook(), time.Now()
	b.noteShown(shownRequest("id-alice", "t:h:alice", "conv"), dialect.ElizaOS)
	b.noteShown(shownRequest("id-mallory", "t:h:mallory", "conv"), dialect.ElizaOS)

	a := answer("", "conv")
	b.answering(a, now)
	if a.Envelope.Recipient.AgentID != "" || a.Envelope.CorrelationID != "conv" {
		t.Fatalf("an ambiguous answer was addressed to %q, correlated %q", a.Envelope.Recipient.AgentID, a.Envelope.CorrelationID)
	}
	a = answer("t:h:alice", "conv")
	b.answering(a, now)
	if a.Envelope.CorrelationID != "conv" {
		t.Fatalf("alice's answer correlated to %q: the newest request under conv is mallory's", a.Envelope.CorrelationID)
	}
	a = answer("t:h:mallory", "conv")
	b.answering(a, now)
	if a.Envelope.CorrelationID != "id-mallory" {
		t.Fatalf("mallory's answer correlated to %q", a.Envelope.CorrelationID)
	}
}

// An unambiguous answer without a recipient (an ACP v2 AgentResponse) goes to the sender of
// the request it answers; after the request expires the book no longer says so.
func TestAnswerBook_AddressesAndExpires(t *testing.T) {
	b, now := newAnswerBook(), time.Now()
	b.noteShown(shownRequest("id-1", "t:h:alice", "conv"), dialect.ElizaOS)
	a := answer("", "conv")
	b.answering(a, now)
	if a.Envelope.Recipient.AgentID != "t:h:alice" || a.Envelope.CorrelationID != "id-1" {
		t.Fatalf("answer to %q correlated %q", a.Envelope.Recipient.AgentID, a.Envelope.CorrelationID)
	}
	a = answer("", "conv")
	b.answering(a, now.Add(2*time.Hour))
	if a.Envelope.Recipient.AgentID != "" {
		t.Fatal("an expired entry addressed an answer")
	}
}

// The book holds at most maxBookEntries: the oldest go first.
func TestAnswerBook_Bounded(t *testing.T) {
	b := newAnswerBook()
	for i := range maxBookEntries + 10 {
		b.noteShown(shownRequest(fmt.Sprint("id-", i), fmt.Sprint("t:h:a", i%32), fmt.Sprint("conv-", i)), dialect.ElizaOS)
	}
	if len(b.recv) != maxBookEntries || len(b.order) != maxBookEntries {
		t.Fatalf("%d entries, %d in order; want %d", len(b.recv), len(b.order), maxBookEntries)
	}
	if _, ok := b.recv["conv-0"]; ok {
		t.Fatal("the oldest entry stayed")
	}
	if _, ok := b.recv[fmt.Sprint("conv-", maxBookEntries+9)]; !ok {
		t.Fatal("the newest entry is missing")
	}
}

// One sender's requests take at most maxSenderEntries of the book: a peer that sends many
// cannot push the others' links out.
func TestAnswerBook_OneSendersShareIsBounded(t *testing.T) {
	b := newAnswerBook()
	b.noteShown(shownRequest("id-alice", "t:h:alice", "conv-alice"), dialect.ElizaOS)
	for i := range maxBookEntries {
		b.noteShown(shownRequest(fmt.Sprint("id-", i), "t:h:mallory", fmt.Sprint("conv-", i)), dialect.ElizaOS)
	}
	if len(b.recv) != maxSenderEntries+1 || b.perSender["t:h:mallory"] != maxSenderEntries {
		t.Fatalf("%d entries, mallory's %d; want mallory's at %d", len(b.recv), b.perSender["t:h:mallory"], maxSenderEntries)
	}
	a := answer("t:h:alice", "conv-alice")
	b.answering(a, time.Now())
	if a.Envelope.CorrelationID != "id-alice" {
		t.Fatalf("alice's link went: answer correlated to %q", a.Envelope.CorrelationID)
	}
}
