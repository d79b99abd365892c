package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// With the inbox on, a request no Go handler takes waits in the inbox; the agent answers it
// later with a response correlated to it, and the requester gets that answer.
func TestInbox_RequestWaitsUntilAgentAnswers(t *testing.T) {
	m := newMesh(t, 2, nil, func(i int, _ *mesh) []Option { return []Option{WithInbox(i == 1)} })
	a, b := m.nodes[0], m.nodes[1]
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, map[string]any{"task": "x"})
	done := make(chan error, 1)
	var resp *protocol.Message
	go func() {
		var err error
		resp, err = a.Request(testCtx(t), req)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	ds, err := b.Inbox().Wait(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Msg.Envelope.MessageID != req.Envelope.MessageID {
		t.Fatalf("inbox holds %d messages, want the request", len(ds))
	}
	answer, _ := b.Builder().Response(ds[0].Msg, protocol.ResponseAccepted, map[string]any{"ok": true})
	if err := b.Send(ctx, answer); err != nil {
		t.Fatal(err)
	}
	if err := b.Inbox().Ack(req.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if resp.Envelope.CorrelationID != req.Envelope.MessageID || b.Inbox().Len() != 0 {
		t.Fatal("answer not correlated, or inbox not emptied by Ack")
	}
	if err := b.Inbox().Ack(req.Envelope.MessageID); err == nil {
		t.Fatal("a second Ack of the same message must say it is gone")
	}
}

// inboxMsg is a message with id n, for tests of the inbox's bookkeeping.
func inboxMsg(n int) *protocol.Message {
	m := &protocol.Message{}
	m.Envelope.MessageID = fmt.Sprintf("msg-%07d", n)
	return m
}

// The inbox lists what waits in arrival order, pages it, takes a message offered twice once,
// and forgets what the agent acknowledged, in any order.
func TestInbox_ListsPagesAndAcknowledges(t *testing.T) {
	ib := newInbox(1<<20, 1<<20)
	now := time.Now()
	for i := 1; i <= 5; i++ {
		size, err := ib.reserve(inboxMsg(i), "p", 100)
		if err != nil {
			t.Fatal(err)
		}
		ib.add(inboxMsg(i), "p", now, size)
	}
	size, _ := ib.reserve(inboxMsg(3), "p", 100)
	ib.add(inboxMsg(3), "p", now, size) // offered again: not queued twice, its room given back
	if ib.Len() != 5 || ib.bytes != 500 || ib.LastSeq() != 5 {
		t.Fatalf("len %d, bytes %d, last seq %d; want 5, 500, 5", ib.Len(), ib.bytes, ib.LastSeq())
	}
	if page := ib.Page(1, 2); len(page) != 2 || page[0].Seq != 2 || page[1].Seq != 3 {
		t.Fatalf("page after 1, limit 2: %+v", page)
	}
	for _, id := range []string{"msg-0000003", "msg-0000001"} {
		if err := ib.Ack(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := ib.Ack("msg-0000003"); err == nil {
		t.Fatal("a message was acknowledged twice")
	}
	var seqs []uint64
	for _, d := range ib.List(0) {
		seqs = append(seqs, d.Seq)
	}
	if !slices.Equal(seqs, []uint64{2, 4, 5}) || ib.bytes != 300 || ib.Len() != 3 {
		t.Fatalf("after two acknowledgements: seqs %v, bytes %d, len %d", seqs, ib.bytes, ib.Len())
	}
	if page := ib.Page(2, 1); len(page) != 1 || page[0].Seq != 4 {
		t.Fatalf("page after 2, limit 1, skipping a taken one: %+v", page)
	}
}

// Many peers, each within its share, can fill the inbox with many small messages: adding,
// paging and acknowledging stay cheap however many wait (each walked the whole inbox; at this
// size that took minutes), in arrival order or out of it.
func TestInbox_AFullInboxStaysCheap(t *testing.T) {
	const count = 200_000
	ib := newInbox(count*100, count*100)
	now := time.Now()
	for i := 0; i < count; i++ {
		size, err := ib.reserve(inboxMsg(i), peer.ID(fmt.Sprint(i%1000)), 100)
		if err != nil {
			t.Fatal(err)
		}
		ib.add(inboxMsg(i), peer.ID(fmt.Sprint(i%1000)), now, size)
	}
	for i := 0; i < count; i++ {
		if page := ib.Page(uint64(i), 10); len(page) == 0 {
			t.Fatalf("page after %d is empty", i)
		}
	}
	for i := count - 1; i >= count/2; i-- { // the newest half, newest first
		if err := ib.Ack(fmt.Sprintf("msg-%07d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < count/2; i++ { // then the rest, in order
		if err := ib.Ack(fmt.Sprintf("msg-%07d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if ib.Len() != 0 || ib.bytes != 0 || len(ib.pending) != 0 || len(ib.byPeer) != 0 {
		t.Fatalf("drained inbox holds len %d, bytes %d, %d entries, %d peers", ib.Len(), ib.bytes, len(ib.pending), len(ib.byPeer))
	}
}
