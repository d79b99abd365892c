package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// docWithUnknowns has an unknown member at every level, a known member set to null, and a
// payload with non-ASCII text and numbers that RFC 8785 rewrites.
const docWithUnknowns = `{
  "envelope": {
    "version": "1.0",
    "message_id": "0190f5a4-7c3e-7000-8000-000000000001",
    "correlation_id": "0190f5a4-7c3e-7000-8000-000000000001",
    "sender": {"agent_id": "acme:host-1:planner", "x-sender-note": {"b": 2, "a": [1, "é"]}},
    "recipient": {"agent_id": "acme:host-2:analyst", "channel": "query", "x-route": ["a", "b"]},
    "timestamp": "2026-05-01T12:00:00.000Z",
    "ttl_seconds": 3600,
    "x-envelope-ext": true
  },
  "message": {
    "type": "request",
    "intent": "query",
    "payload": {"question": "Grüße, 世界 😀", "price": 1.50, "big": 1e21, "n": null},
    "x-body-ext": {"nested": {"deep": [null, false]}}
  },
  "x-top": "kept",
  "x-null": null
}`

func TestCodec_JSONAndYAMLGiveTheSameDocumentBothWays(t *testing.T) {
	m := validRequest(t)
	j := mustEncode(t, m, protocol.JSON)
	y := mustEncode(t, m, protocol.YAML)

	fromYAML := mustDecode(t, string(y))
	if !reflect.DeepEqual(m, fromYAML) {
		t.Fatalf("YAML decodes to another message\nJSON: %s\nYAML: %s", j, y)
	}
	if got := mustEncode(t, fromYAML, protocol.JSON); !bytes.Equal(got, j) {
		t.Fatalf("JSON -> YAML -> JSON changed the document\n got: %s\nwant: %s", got, j)
	}
	if got := mustEncode(t, mustDecode(t, string(j)), protocol.YAML); !bytes.Equal(got, y) {
		t.Fatalf("YAML -> JSON -> YAML changed the document\n got: %s\nwant: %s", got, y)
	}
}

func TestCodec_DetectFormat_FirstNonSpaceByte(t *testing.T) {
	for in, want := range map[string]protocol.Format{
		`{"a":1}`: protocol.JSON, " \n\t{": protocol.JSON, "\ufeff{": protocol.JSON,
		"envelope:\n": protocol.YAML, "---\n{": protocol.YAML, "": protocol.YAML,
	} {
		if got := protocol.DetectFormat([]byte(in)); got != want {
			t.Errorf("DetectFormat(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCodec_UnknownFields_SurviveAtEveryLevel(t *testing.T) {
	m := mustDecode(t, docWithUnknowns)
	for where, x := range map[string]protocol.Extra{
		"document": m.Extra, "envelope": m.Envelope.Extra, "sender": m.Envelope.Sender.Extra,
		"recipient": m.Envelope.Recipient.Extra, "message": m.Message.Extra,
	} {
		if len(x) == 0 {
			t.Errorf("%s: unknown members were dropped", where)
		}
	}
	j := mustEncode(t, m, protocol.JSON)
	again := mustDecode(t, string(j))
	if !reflect.DeepEqual(canonicalExtras(m), canonicalExtras(again)) {
		t.Fatalf("unknown members changed on re-encode: %s", j)
	}
	if !bytes.Equal(mustCanonical(t, m), mustCanonical(t, again)) {
		t.Fatal("canonical form changed on re-encode")
	}
	for _, member := range []string{`"x-top":"kept"`, `"x-null":null`, `"x-envelope-ext":true`, `"x-route":["a","b"]`} {
		if !bytes.Contains(j, []byte(member)) {
			t.Errorf("re-encoded document lacks %s:\n%s", member, j)
		}
	}
}

// canonicalExtras returns every Extra member with its value compacted, so that white space
// differences do not count.
func canonicalExtras(m *protocol.Message) map[string]string {
	out := map[string]string{}
	add := func(where string, x protocol.Extra) {
		for k, v := range x {
			var b bytes.Buffer
			if err := json.Compact(&b, v); err != nil {
				panic(err)
			}
			out[where+"."+k] = b.String()
		}
	}
	add("", m.Extra)
	add("envelope", m.Envelope.Extra)
	add("sender", m.Envelope.Sender.Extra)
	add("recipient", m.Envelope.Recipient.Extra)
	add("message", m.Message.Extra)
	return out
}

func TestCodec_UnknownFields_SignatureStaysValidAfterYAMLRoundTrip(t *testing.T) {
	m := mustDecode(t, docWithUnknowns)
	if err := protocol.Sign(m, fixedKey(t)); err != nil {
		t.Fatal(err)
	}
	y := mustEncode(t, m, protocol.YAML)
	back := mustDecode(t, string(y))
	if err := protocol.Verify(back); err != nil {
		t.Fatalf("signature broke in the YAML round trip: %v\n%s", err, y)
	}
	if !bytes.Equal(mustCanonical(t, m), mustCanonical(t, back)) {
		t.Fatalf("canonical form changed through YAML:\n%s\n%s", mustCanonical(t, m), mustCanonical(t, back))
	}
	// And again through JSON, from the YAML-decoded message.
	if err := protocol.Verify(mustDecode(t, string(mustEncode(t, back, protocol.JSON)))); err != nil {
		t.Fatalf("signature broke in YAML -> JSON: %v", err)
	}
}

// A member may be named "" (found by FuzzDecode: it was dropped from the wire encoding).
func TestCodec_MemberWithEmptyName_Survives(t *testing.T) {
	doc := `{"":0,"envelope":{"sender":{"":{}},"recipient":{"":1},"":2},"message":{"":3}}`
	m := mustDecode(t, doc)
	for _, f := range []protocol.Format{protocol.JSON, protocol.YAML} {
		again := mustDecode(t, string(mustEncode(t, m, f)))
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("%s round trip lost a member named \"\": %+v", f, again)
		}
	}
}

func TestCodec_KnownFieldHoldingNull_IsKeptAsNull(t *testing.T) {
	m := mustDecode(t, `{"envelope":{"version":"1.0","correlation_id":null},"message":{"type":"event"}}`)
	if string(m.Envelope.Extra["correlation_id"]) != "null" {
		t.Fatalf("correlation_id: null was not kept: %#v", m.Envelope.Extra)
	}
	if j := mustEncode(t, m, protocol.JSON); !bytes.Contains(j, []byte(`"correlation_id":null`)) {
		t.Fatalf("re-encoded without the null: %s", j)
	}
}

// Another implementation may write members we would leave out (the draft's own template has
// `correlation_id: ""`). They are kept exactly, or its signature would not verify here.
func TestCodec_EmptyAndZeroKnownMembers_AreKeptAsWritten(t *testing.T) {
	doc := `{"envelope":{"version":"1.0","correlation_id":"","ttl_seconds":0,"sender":{"identity_sig":""},"recipient":{}},"message":{"type":"","payload":{}}}`
	m := mustDecode(t, doc)
	if again := mustDecode(t, string(mustEncode(t, m, protocol.JSON))); !reflect.DeepEqual(m, again) {
		t.Fatalf("re-encoding changed the message: %+v", again)
	}
	c := string(mustCanonical(t, m))
	for _, want := range []string{`"correlation_id":""`, `"ttl_seconds":0`, `"type":""`} {
		if !strings.Contains(c, want) {
			t.Errorf("canonical form lacks %s: %s", want, c)
		}
	}
	if strings.Contains(c, "identity_sig") {
		t.Errorf("an empty identity_sig is in the canonical form: %s", c)
	}
	// A field set later wins over the kept placeholder, for "" and for null alike.
	m = mustDecode(t, `{"envelope":{"version":null,"correlation_id":"","ttl_seconds":0},"message":{"type":"request","intent":"query"}}`)
	if err := newTestBuilder(t, "a:b:c").Seal(m); err != nil {
		t.Fatal(err)
	}
	j := string(mustEncode(t, m, protocol.JSON))
	for _, want := range []string{`"version":"1.0"`, `"ttl_seconds":3600`, `"correlation_id":"` + m.Envelope.MessageID + `"`} {
		if !strings.Contains(j, want) {
			t.Errorf("sealed document lacks %s: %s", want, j)
		}
	}
	if err := protocol.Verify(mustDecode(t, j)); err != nil {
		t.Fatal(err)
	}
}

func TestCodec_Decode_RefusesWhatIsNotOneJSONObject(t *testing.T) {
	for name, doc := range map[string]string{
		"not UTF-8":            "{\"envelope\":{\"version\":\"\xff\"}}",
		"trailing data":        `{"envelope":{}} {}`,
		"trailing NUL":         "{\"envelope\":{}}\x00",
		"array":                `[1,2]`,
		"null":                 `null`,
		"duplicate member":     `{"envelope":{"version":"1.0","version":"2.0"}}`,
		"duplicate top-level":  `{"message":{},"message":{}}`,
		"escaped duplicate":    `{"envelope":{"version":"1.0","vers\u0069on":"2.0"}}`,
		"wrong type":           `{"envelope":{"ttl_seconds":"3600"}}`,
		"fractional ttl":       `{"envelope":{"ttl_seconds":1.5}}`,
		"bad escape":           `{"envelope":{"version":"\q"}}`,
		"control char":         "{\"envelope\":{\"version\":\"a\tb\"}}",
		"truncated":            `{"envelope":{"version":"1.0"`,
		"nested too deeply":    `{"message":{"payload":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`,
		"overflowing number":   `{"message":{"payload":{"h":1E400}}}`,
		"lone surrogate":       `{"envelope":{"message_id":"\ud800x"}}`,
		"lone surrogate (raw)": `{"message":{"payload":{"s":"\udc00"}}}`,
		"surrogate, then NUL":  `{"x":"\ud800\u0000"}`,
		"low before high":      `{"x":"\udc00\ud800"}`,
		"high, high":           `{"message":{"payload":{"\ud800\ud800":1}}}`,
		"nested duplicate":     `{"message":{"payload":{"a":{"b":1,"b":1}}}}`,
		"YAML with merge keys": "envelope:\n  <<: {version: '1.0'}\n",
		"YAML infinity":        "envelope: {}\nmessage:\n  payload: {x: .inf}\n",
		"YAML two documents":   "envelope: {}\n---\nenvelope: {}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := protocol.Decode([]byte(doc))
			wantCode(t, err, protocol.CodePayloadInvalid)
		})
	}
}

func TestCodec_YAML_AliasBombIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	_, err := protocol.DecodeYAML([]byte(b.String()))
	wantCode(t, err, protocol.CodePayloadInvalid)
}

func TestCodec_ParseFormat(t *testing.T) {
	for in, want := range map[string]protocol.Format{"json": protocol.JSON, "yaml": protocol.YAML, "yml": protocol.YAML} {
		if got, err := protocol.ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := protocol.ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) succeeded")
	}
}

// A 1 MB body of aliases to one large string expanded to 286 MB of JSON before the
// size check refused it. Bytes are counted while expanding: the bomb is refused as soon as it
// passes the bound, and what was allocated stays near the bound, not the expansion.
func TestCodec_YAML_StringAliasBombIsRefusedWithinTheByteBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("envelope: {recipient: {agent_id: a:b:c}}\nmessage:\n  payload:\n    big: &big \"")
	b.WriteString(strings.Repeat("x", 100<<10))
	b.WriteString("\"\n    copies: [")
	for i := 0; i < 9000; i++ {
		b.WriteString("*big, ")
	}
	b.WriteString("*big]\n") // about 150 KB of YAML that expands to 900 MB of JSON
	const limit = 4 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := protocol.DecodeYAMLLimit([]byte(b.String()), limit)
	runtime.ReadMemStats(&after)
	wantCode(t, err, protocol.CodePayloadInvalid)
	if !errors.Is(err, protocol.ErrDocumentTooLarge) {
		t.Fatalf("the bomb's error does not say it is too large: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16*limit {
		t.Fatalf("refusing the bomb allocated %d MiB; the bound is %d MiB", grew>>20, limit>>20)
	}
}

func TestCodec_YAML_InputOverTheLimitIsRefusedBeforeParsing(t *testing.T) {
	doc := "a: [" + strings.Repeat("1,", protocol.MaxYAMLBytes/2) + "1]\n"
	_, err := protocol.YAMLToJSON([]byte(doc))
	if !errors.Is(err, protocol.ErrDocumentTooLarge) || !strings.Contains(err.Error(), "as JSON") {
		t.Fatalf("a %d-byte YAML document: %v, want ErrDocumentTooLarge saying to send JSON", len(doc), err)
	}
}

// DecodeJSONShared gives the same message as DecodeJSON, holding views of its input instead
// of copies; an append to a held member never writes into the input.
func TestCodec_DecodeJSONSharedHoldsViewsOfItsInput(t *testing.T) {
	raw, err := protocol.EncodeJSON(validRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	copied, err := protocol.DecodeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := protocol.DecodeJSONShared(raw)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := protocol.EncodeJSON(copied)
	b, _ := protocol.EncodeJSON(shared)
	if !bytes.Equal(a, b) {
		t.Fatalf("the shared decoding differs:\n%s\n%s", a, b)
	}
	if &shared.Message.Payload[0] == &copied.Message.Payload[0] || !bytes.Contains(raw, shared.Message.Payload) {
		t.Fatal("the payload is not a view of the input")
	}
	before := bytes.Clone(raw)
	_ = append(shared.Message.Payload, "x"...)
	if !bytes.Equal(raw, before) {
		t.Fatal("an append to the payload wrote into the input")
	}
	if _, err := protocol.DecodeJSONShared([]byte("{\"envelope\":1}")); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("a malformed document: %v", err)
	}
}

// YAML numbers are held to JSON's rule (a literal that is not exactly its double is refused),
// YAML's own number forms are converted, and strings are not HTML-escaped (which could make a
// document six times longer than its YAML).
func TestCodec_YAML_NumbersAndStrings(t *testing.T) {
	for yml, want := range map[string]string{
		"n: 0x1F":      `{"n":31}`,
		"n: 1_000":     `{"n":1000}`,
		"n: .5":        `{"n":0.5}`,
		"n: 1.50":      `{"n":1.50}`,
		"s: '<a&b>'":   `{"s":"<a&b>"}`,
		"'<k>': 1":     `{"<k>":1}`,
		"n: 12345e-2":  `{"n":12345e-2}`,
		"s: \"x\\ty\"": `{"s":"x\ty"}`,
	} {
		got, err := protocol.YAMLToJSON([]byte(yml))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s (%v), want %s", yml, got, err, want)
		}
	}
	doc := "envelope: {version: '1.0'}\nmessage:\n  payload: {budget_cents: 9007199254740993}\n"
	_, err := protocol.DecodeYAML([]byte(doc))
	wantCode(t, err, protocol.CodePayloadInvalid)
}
