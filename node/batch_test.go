package node

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// A burst read as one batch has its signatures checked together, on every core (verifyAll);
// what depends on order still goes in order: each forged message is refused, in the order
// sent, a copy of an earlier message of the burst is DUPLICATE, and every other message is
// receipted.
func TestInbound_ABurstIsCheckedTogetherAndAnsweredInOrder(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRateLimit(1e6, 1<<20)}, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	var burst bytes.Buffer
	var forged, good []string
	var first *protocol.Message
	for i := range 40 {
		ev := event(t, m.nodes[0].Builder(), agentName(1))
		if i%3 == 1 {
			ev.Message.Payload = []byte(`{"event_type":"tampered"}`) // after signing
			forged = append(forged, ev.Envelope.MessageID)
		} else {
			good = append(good, ev.Envelope.MessageID)
		}
		if i == 0 {
			first = ev
		}
		if err := protocol.WriteFrame(&burst, mustEncode(t, ev)); err != nil {
			t.Fatal(err)
		}
	}
	if err := protocol.WriteFrame(&burst, mustEncode(t, first)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.s.Write(burst.Bytes()); err != nil { // one write: the frames arrive together
		t.Fatal(err)
	}
	var refused, receipted []string
	duplicates := 0
	for len(refused)+len(receipted)+duplicates < 41 {
		r, err := c.next()
		if err != nil {
			t.Fatalf("after %d refusals, %d receipts and %d duplicates: %v", len(refused), len(receipted), duplicates, err)
		}
		switch r.Message.Type {
		case protocol.TypeError:
			e, _ := protocol.ErrorOf(r)
			switch {
			case e.Code == protocol.CodeIdentityInvalid:
				refused = append(refused, r.Envelope.CorrelationID)
			case e.Code == protocol.CodeDuplicate && r.Envelope.CorrelationID == first.Envelope.MessageID:
				duplicates++
			default:
				t.Fatalf("unexpected refusal %s of %s", e.Code, r.Envelope.CorrelationID)
			}
		case protocol.TypeResponse:
			var body receiptBody
			if err := json.Unmarshal(r.Message.Payload, &body); err != nil {
				t.Fatal(err)
			}
			receipted = append(receipted, body.Receipt.MessageIDs...)
		}
	}
	if !slices.Equal(refused, forged) {
		t.Errorf("refused %v, want the forged ones in the order sent: %v", refused, forged)
	}
	slices.Sort(receipted)
	slices.Sort(good)
	if !slices.Equal(receipted, good) {
		t.Errorf("receipted %d messages, want the %d good ones", len(receipted), len(good))
	}
	if duplicates != 1 {
		t.Errorf("%d DUPLICATE refusals of the copy, want 1", duplicates)
	}
}
