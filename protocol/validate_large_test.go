package protocol_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// Validate checks the payload members the node must understand, and the JSON type of the
// others its payload types name, without copying them: the detail of a 16 MiB event is checked
// to be text, not decoded.
func TestValidate_PayloadMembersAreTypeCheckedWithoutACopy(t *testing.T) {
	for _, c := range []struct {
		typ     protocol.Type
		payload string
		ok      bool
	}{
		{protocol.TypeEvent, `{"event_type":"x","detail":"text","data":{"any":[1,"thing"]}}`, true},
		{protocol.TypeEvent, `{"event_type":"x","detail":null,"data":null}`, true},
		{protocol.TypeEvent, `{"event_type":"x","detail":5}`, false},
		{protocol.TypeEvent, `{"event_type":"x","detail":{"a":1}}`, false},
		{protocol.TypeEvent, `{"event_type":"x","severity":"loud"}`, false},
		{protocol.TypeEvent, `{"detail":"no type"}`, false},
		{protocol.TypeResponse, `{"status":"accepted","detail":"fine","result":{"big":"x"}}`, true},
		{protocol.TypeResponse, `{"status":"accepted","detail":[1]}`, false},
		{protocol.TypeError, `{"code":"TIMEOUT","message":"m","detail":{"x":1},"retryable":true}`, true},
		{protocol.TypeError, `{"code":"TIMEOUT","message":7}`, false},
		{protocol.TypeError, `{"code":"TIMEOUT","retryable":"yes"}`, false},
	} {
		m := validEvent(t)
		m.Message.Type, m.Message.Payload = c.typ, json.RawMessage(c.payload)
		if m.Message.Type != protocol.TypeEvent {
			m.Envelope.CorrelationID = m.Envelope.MessageID
		}
		if err := validate(m); (err == nil) != c.ok {
			t.Errorf("%s %s: %v", c.typ, c.payload, err)
		}
	}
	m := validEvent(t)
	m.Message.Payload = json.RawMessage(`{"event_type":"x","detail":"` + strings.Repeat(`text\n`, 2<<20) + `"}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := protocol.Validate(m, fixedNow, len(m.Message.Payload)+1024, protocol.Limits{}) // the size as a frame gives it
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("validating an event with a %d MiB detail allocated %d KiB", len(m.Message.Payload)>>20, grew>>10)
	}
}

// validEvent returns a signed event from the fixed key at fixedNow.
func validEvent(t testing.TB) *protocol.Message {
	t.Helper()
	m, err := newTestBuilder(t, "acme:host-1:planner").Event("acme:host-2:analyst", protocol.IntentNotify, protocol.EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
