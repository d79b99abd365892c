package dialect

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/iacp-node/iacp-node/protocol"
)

func fuzzSeeds(f *testing.F, d Dialect) {
	for _, doc := range examples(f, d) {
		f.Add(doc)
	}
}

// fuzzDecode checks, for any input: Decode never panics; what it accepts translates to IACP and
// back to a document canonically equal to the input, or is refused with an IACP code.
func fuzzDecode(f *testing.F, d Dialect) {
	fuzzSeeds(f, d)
	b := builder(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		sameSchemaValues(t, doc)
		dec, err := Decode(d, doc)
		if err != nil {
			if protocol.CodeOf(err) == "" || protocol.CodeOf(err) == protocol.CodeInternalError {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		if got, err := marshal(dec.Members); err != nil || !bytes.Equal(got, mustMarshal(t, dec.Members)) {
			t.Fatalf("marshal = %s, %v; json.Marshal writes %s", got, err, mustMarshal(t, dec.Members))
		}
		draft, err := ToIACP(dec, now)
		if err != nil {
			if protocol.CodeOf(err) != protocol.CodeTimeout {
				t.Fatalf("a valid document did not translate: %v", err)
			}
			return
		}
		if got, err := marshalExtension(&draft.Extension); err != nil || !bytes.Equal(got, mustMarshal(t, draft.Extension)) {
			t.Fatalf("marshalExtension = %s, %v; json.Marshal writes %s", got, err, mustMarshal(t, draft.Extension))
		}
		m, err := draft.Message()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Seal(m); err != nil {
			t.Fatal(err)
		}
		back, err := FromIACP(m, d)
		if err != nil {
			t.Fatalf("from IACP: %v", err)
		}
		if !bytes.Equal(canonical(t, back), canonical(t, doc)) {
			t.Fatalf("round trip differs:\n got %s\nwant %s", canonical(t, back), canonical(t, doc))
		}
	})
}

// sameSchemaValues checks that schemaValue reads every member of doc, when doc parses, as
// jsonschema.UnmarshalJSON does.
func sameSchemaValues(t *testing.T, doc []byte) {
	m, err := parseObject("", doc)
	if err != nil {
		return
	}
	for k, v := range m {
		got, err := schemaValue(v, 0)
		want, werr := jsonschema.UnmarshalJSON(bytes.NewReader(v))
		if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("schemaValue(%s) of member %q = %#v, %v; UnmarshalJSON: %#v, %v", v, k, got, err, want, werr)
		}
	}
}

// mustMarshal is json.Marshal(m), which marshal and marshalExtension must equal.
func mustMarshal(t *testing.T, m any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeIaCP1(f *testing.F)   { fuzzDecode(f, IaCP1) }
func FuzzDecodeElizaOS(f *testing.F) { fuzzDecode(f, ElizaOS) }
func FuzzDecodeACPv2(f *testing.F)   { fuzzDecode(f, ACPv2) }

// FuzzDecodeA2ACP starts, besides the draft's examples, from the shapes they do not show: an
// event, a document without intent, payload or security, an intent that is no custom intent, a
// handshake's refusal, an error whose correlation id is the payload's.
func FuzzDecodeA2ACP(f *testing.F) {
	const agents = `"protocol_version":"1.0","message_id":"0193a5b0-7c1e-7000-8000-000000000001","timestamp":"2026-01-27T14:30:00.5+01:00",` +
		`"source_agent":{"agent_id":"a","domain":"d","version":"1.0.0"},"target_agent":{"agent_id":"ns:h:b","domain":"ns","version":"0.0.0"}`
	for _, rest := range []string{
		`"message_type":"event","intent":"dataset_ready","payload":{"dataset_id":"d-1"}`,
		`"message_type":"event"`,
		`"message_type":"request","intent":"a b","payload":{"correlation_id":"c-1"},"security":{"auth_token":"t"}`,
		`"message_type":"response","intent":"accept_handshake","payload":{"accepted":false,"reason":"busy","status":"done"}`,
		`"message_type":"error","payload":{"correlation_id":"c-1","code":5,"error":{"code":"RATE_LIMIT_EXCEEDED","message":"slow down","retry_after":1.5}}`,
	} {
		f.Add([]byte(`{` + agents + `,` + rest + `}`))
	}
	fuzzDecode(f, A2ACP)
}

func FuzzRecognise(f *testing.F) {
	for _, d := range Translated {
		fuzzSeeds(f, d)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := Recognise(doc)
		if err != nil && protocol.CodeOf(err) != protocol.CodePayloadInvalid {
			t.Fatalf("Recognise refused with %v, want PAYLOAD_INVALID", err)
		}
		if err == nil && d == "" {
			t.Fatal("no dialect and no error")
		}
		if !MayBeForeign(doc) && err == nil && d != IACP {
			t.Fatalf("recognised as %s, but MayBeForeign is false", d)
		}
		// Reading the names only sees the members a full parse sees.
		if m, perr := parseObject("", doc); perr == nil {
			names, err := topNames(doc)
			if err != nil || len(names) != len(m) {
				t.Fatalf("topNames = %v, %v; the document has %d members", names, err, len(m))
			}
			for k := range m {
				if _, ok := names[k]; !ok {
					t.Fatalf("topNames misses %q", k)
				}
			}
		}
	})
}
