package node

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// A large message waits in the inbox as its envelope only while the store holds it: the frame
// it came in is not kept in memory, Message reads it whole from the store, a restart offers it
// the same way, and once the agent took it Message says so. A small one stays whole.
func TestInbox_ALargeMessageWaitsOnDiskAndIsReadWhole(t *testing.T) {
	start, _ := restartable(t, "test:stored:b")
	b := start()
	a := loopbackSender(t, "test:stored:a", b)
	big, err := a.Builder().Event("test:stored:b", protocol.IntentNotify,
		protocol.EventPayload{EventType: "big", Detail: strings.Repeat("x", storedBytes)})
	if err != nil {
		t.Fatal(err)
	}
	small := event(t, a.Builder(), "test:stored:b")
	for _, m := range []*protocol.Message{big, small} {
		if err := a.Send(testCtx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		ds := b.Inbox().List(0)
		if len(ds) != 2 {
			t.Fatalf("%s: the inbox holds %d messages, want 2", when, len(ds))
		}
		for _, d := range ds {
			isBig := d.Msg.Envelope.MessageID == big.Envelope.MessageID
			if d.Stored() != isBig {
				t.Fatalf("%s: %s kept on disk: %v, want %v", when, d.Msg.Message.Type, d.Stored(), isBig)
			}
			if isBig && (d.Msg.Message.Payload != nil || d.Msg.Message.Type != protocol.TypeEvent ||
				d.Msg.Envelope.Sender.AgentID != "test:stored:a") {
				t.Fatalf("%s: what the inbox keeps of the large message: %+v", when, d.Msg)
			}
			m, err := d.Message()
			want := small
			if isBig {
				want = big
			}
			if err != nil || !bytes.Equal(m.Message.Payload, want.Message.Payload) {
				t.Fatalf("%s: Message: %d payload bytes (%v), want %d", when, len(m.Message.Payload), err, len(want.Message.Payload))
			}
		}
	}
	check("received")
	b.Close()
	b = start()
	defer b.Close()
	check("after a restart")
	ds := b.Inbox().List(0)
	if err := b.Inbox().Ack(big.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if _, err := d.Message(); d.Stored() && !errors.Is(err, ErrTaken) {
			t.Fatalf("Message of a taken message: %v, want ErrTaken", err)
		}
	}
}
