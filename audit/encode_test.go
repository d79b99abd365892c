package audit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// sameEntry decodes two lines and reports whether they hold the same entry, payloads
// compared as JSON values.
func sameEntry(t *testing.T, a, b []byte) bool {
	t.Helper()
	var ea, eb Entry
	if err := json.Unmarshal(a, &ea); err != nil {
		t.Fatalf("line %q is not a JSON entry: %v", a, err)
	}
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatalf("line %q is not a JSON entry: %v", b, err)
	}
	var pa, pb any
	if len(ea.Payload) > 0 {
		_ = json.Unmarshal(ea.Payload, &pa)
		_ = json.Unmarshal(eb.Payload, &pb)
	}
	ea.Payload, eb.Payload = nil, nil
	return reflect.DeepEqual(ea, eb) && reflect.DeepEqual(pa, pb)
}

// An entry is written without reflection, as json.Marshal writes it: the same bytes for an
// entry without HTML-special characters, and always one JSON value on one line that decodes
// to the same entry.
func TestAppendEntry_WritesWhatJSONMarshalWrites(t *testing.T) {
	at := time.Date(2026, 11, 27, 21, 0, 0, 123456789, time.UTC)
	plain := []Entry{
		{Seq: 1, Time: at, Event: EventSent, MessageID: "0196a2b0-0000-7000-8000-000000000001", Type: "request",
			Intent: "handoff", From: "acme:host-1:planner", To: "acme:host-2:analyst",
			Payload: json.RawMessage(`{"task":"summarise","n":3,"tags":["a","b"],"x":null}`), Prev: GenesisHash},
		{Seq: 2, Time: at.Add(time.Second), Event: EventRefused, Code: protocol.CodeIdentityInvalid,
			Reason: "bad \"signature\"\n\ttab \\ and \x01 control", Peer: "12D3KooW", Size: 1513, SHA256: "ab",
			Suppressed: 4, Prev: "cd"},
		{Seq: 3, Time: at, Event: EventApproved, By: "operator é ü 😀", PayloadSHA256: "ef", Prev: "01"},
		{Seq: 4, Time: time.Time{}.UTC(), Event: EventAcked, CorrelationID: "c", Prev: ""},
	}
	for _, e := range plain {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEntry(nil, &e)
		if err != nil {
			t.Fatalf("entry %d: %v", e.Seq, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("entry %d:\n got %s\nwant %s", e.Seq, got, want)
		}
	}
	// Characters encoding/json escapes and this does not, and a payload with white space
	// (another sender's encoder): other bytes, one line, the same entry.
	other := []Entry{
		{Seq: 5, Time: at, Event: EventReceived, Reason: "<b>&amp;</b> \u2028 line sep", Prev: "x",
			Payload: json.RawMessage("{\n  \"html\": \"<script>&\",\n  \"list\": [ 1 , 2 ]\n}")},
		{Seq: 6, Time: at, Event: EventReceived, From: "bad utf8 \xff\xfe", Prev: "y"},
	}
	for _, e := range other {
		want, _ := json.Marshal(e)
		got, err := appendEntry(nil, &e)
		if err != nil {
			t.Fatalf("entry %d: %v", e.Seq, err)
		}
		if bytes.ContainsAny(got, "\n\r") || !json.Valid(got) || !sameEntry(t, got, want) {
			t.Errorf("entry %d: %s is not one line holding the entry json.Marshal writes as %s", e.Seq, got, want)
		}
	}
	// A payload that is not JSON is refused, never written.
	bad := Entry{Seq: 7, Time: at, Event: EventSent, Payload: json.RawMessage(`{"a":`)}
	if _, err := appendEntry(nil, &bad); err == nil {
		t.Error("a payload that is not JSON was written")
	}
}

// FuzzAppendEntry: whatever the strings and the payload, an entry is either refused (its
// payload is not JSON) or written as one line that decodes to what json.Marshal's line does.
func FuzzAppendEntry(f *testing.F) {
	f.Add("acme:a:b", "reason <&> \u2028", []byte(`{"a":[1,2.5e3,"x"],"b":{"c":null}}`), uint64(7), 12)
	f.Add("\xff", "\n\t\x00", []byte("  [ true , false ]  "), uint64(0), 0)
	f.Add("", "", []byte(`{"a":`), uint64(1), -3)
	f.Fuzz(func(t *testing.T, from, reason string, payload []byte, seq uint64, size int) {
		e := Entry{Seq: seq, Time: time.Unix(int64(seq%4e9), int64(size)&0xfffffff).UTC(), Event: EventReceived,
			From: from, Reason: reason, Payload: payload, Size: size, Prev: GenesisHash}
		got, err := appendEntry(nil, &e)
		if err != nil {
			if len(payload) > 0 && json.Valid(payload) {
				t.Skipf("the protocol's scanner is stricter than encoding/json here: %v", err)
			}
			return
		}
		if len(payload) > 0 && !json.Valid(payload) {
			t.Fatalf("payload %q is not JSON, yet the entry was written: %s", payload, got)
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.ContainsAny(got, "\n\r") || !sameEntry(t, got, want) {
			t.Fatalf("got %s, want the entry of %s", got, want)
		}
	})
}

// Every member of Entry is written: an entry with each field set (but Retention, which takes
// json.Marshal) is json.Marshal's bytes. A field added to Entry and not to appendEntry fails
// here.
func TestAppendEntry_WritesEveryField(t *testing.T) {
	var e Entry
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case name == "Retention":
		case f.Type() == reflect.TypeOf(time.Time{}):
			f.Set(reflect.ValueOf(time.Date(2026, 11, 27, 22, 0, 0, 5, time.UTC)))
		case f.Type() == reflect.TypeOf(json.RawMessage{}):
			f.SetBytes([]byte(`{"field":"` + name + `"}`))
		case f.Kind() == reflect.String:
			f.SetString("value of " + name)
		case f.CanInt():
			f.SetInt(int64(i + 1))
		case f.CanUint():
			f.SetUint(uint64(i + 1))
		default:
			t.Fatalf("Entry.%s is a %s: teach appendEntry and this test to write it", name, f.Type())
		}
	}
	want, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendEntry(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("an entry with every field set:\n got %s\nwant %s", got, want)
	}
}
