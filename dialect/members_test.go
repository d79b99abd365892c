package dialect

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/iacp-node/iacp-node/protocol"
)

// marshal writes what json.Marshal writes, for plain members and for those it must escape or
// compact: names and values with <, >, &, U+2028, control characters, invalid UTF-8, white
// space inside and outside strings, and null; and it refuses what json.Marshal refuses.
func TestMarshal_IsJSONMarshal(t *testing.T) {
	values := []string{`"a"`, `1`, `{"b":[1,2]}`, `"a b"`, ` {"b" : [1, 2]} `, `"<&>"`, "\"\u2028\u2029\"", `"\u2028"`,
		`"\"x\\\" y"`, `{"a":"\\"}`, "[\n1\t]", `null`, `"é"`, `{"z":1,"a":2}`}
	names := []string{"a", "", "<b>", "a&b", "é", "\u2028", "tab\t", "\xff", `q"`, "zz", "A"}
	m := Members{}
	for i, v := range values {
		m[names[i%len(names)]+strings.Repeat("_", i)] = json.RawMessage(v)
	}
	m["nil"] = nil
	for _, members := range []Members{nil, {}, m, {"one": json.RawMessage(`"1"`)}, {"a": json.RawMessage(`{`)},
		{"a": json.RawMessage(`"<"`), "b": json.RawMessage(`{"x":}`)}, {"a": json.RawMessage{}}} {
		got, err := marshal(members)
		want, werr := json.Marshal(members)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Errorf("marshal(%v) = %s, %v\njson.Marshal: %s, %v", members, got, err, want, werr)
		}
	}
}

// A document is split into the members encoding/json finds, verbatim, that do not alias the
// caller's bytes; what encoding/json reads but protocol refuses (a nested duplicate) is still
// read where encoding/json read it before: payloadOf and Recognise.
func TestParseObject_SplitsAndOwnsItsCopy(t *testing.T) {
	doc := []byte(`{ "a" : {"x": [1, 2]}, "b":"s" , "\u0063":null}`)
	m, err := parseObject(ElizaOS, doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": `{"x": [1, 2]}`, "b": `"s"`, "c": `null`}
	if len(m) != len(want) {
		t.Fatalf("members %v, want %v", m, want)
	}
	for k, v := range want {
		if string(m[k]) != v {
			t.Errorf("member %s = %s, want %s", k, m[k], v)
		}
	}
	copy(doc, bytes.Repeat([]byte{' '}, len(doc)))
	if string(m["b"]) != `"s"` || string(m["a"]) != `{"x": [1, 2]}` {
		t.Error("the members, or their names, alias the caller's document")
	}
	for _, bad := range []string{`{"a":{"x":1,"x":2}}`, `{"n":9007199254740993}`} {
		_, err := parseObject(ElizaOS, []byte(bad))
		_, cerr := protocol.CanonicalJSON([]byte(bad))
		if err == nil || cerr == nil || !strings.HasSuffix(err.Error(), "elizaos document is not valid JSON: "+cerr.Error()) {
			t.Errorf("parseObject(%s) = %v; want CanonicalJSON's refusal %v", bad, err, cerr)
		}
		if payloadOf([]byte(bad)) == nil {
			t.Errorf("payloadOf(%s): encoding/json reads it", bad)
		}
		if d, err := Recognise([]byte(bad)); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("Recognise(%s) = %s, %v; want it read, and no dialect", bad, d, err)
		}
	}
}

// An extension is written as json.Marshal writes it, whichever members it has.
func TestMarshalExtension_IsJSONMarshal(t *testing.T) {
	for _, ext := range []Extension{{Name: ElizaOS}, {Name: "a<b", Priority: "high"},
		{Name: A2ACP, Members: Members{"b": json.RawMessage(`1`), "a": json.RawMessage(` "x" `)}, Absent: []string{"z", "<y>"},
			PayloadReplaced: Members{"status": json.RawMessage(`"done"`)}, PayloadAdded: []string{"status"}},
		{Name: IaCP1, Members: Members{}, Absent: []string{}, PayloadAdded: []string{"code", "message"}},
		{Name: IaCP1, Members: Members{"bad": json.RawMessage(`{`)}}} {
		got, err := marshalExtension(&ext)
		want, werr := json.Marshal(ext)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Errorf("marshalExtension(%+v) = %s, %v\njson.Marshal: %s, %v", ext, got, err, want, werr)
		}
	}
}

// The A2ACP schema's instance is read as jsonschema.UnmarshalJSON reads it: numbers as
// json.Number, at every depth, whatever the escapes.
func TestSchemaValue_IsUnmarshalJSON(t *testing.T) {
	for _, v := range []string{`"a"`, `"\u00e9\n"`, `"\ud800"`, `-1.5e3`, `9007199254740993`, `true`, `false`, `null`,
		`{"a":{"b":{"c":[1,{"d":2}]}},"e":"f","g":[]}`, `[1,"2",[3]]`, `{}`, `{"a":1,"a":2}`, `{"\u0061":"\u0062"}`} {
		got, err := schemaValue([]byte(v), 0)
		want, werr := jsonschema.UnmarshalJSON(strings.NewReader(v))
		if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("schemaValue(%s) = %#v, %v; UnmarshalJSON: %#v, %v", v, got, err, want, werr)
		}
	}
}

// A document in invalid UTF-8 is refused, as IACP's decoder refuses one: a member name in it
// could not come back from the extension (testdata/fuzz/FuzzDecodeIaCP1 found one).
func TestParseObject_RefusesInvalidUTF8(t *testing.T) {
	for _, doc := range []string{"{\"\x81\":{}}", "{\"a\":\"\xff\"}"} {
		_, err := Decode(ElizaOS, []byte(doc))
		if protocol.CodeOf(err) != protocol.CodePayloadInvalid || !strings.Contains(err.Error(), "elizaos document is not valid UTF-8") {
			t.Errorf("Decode(%q) = %v, want PAYLOAD_INVALID: not valid UTF-8", doc, err)
		}
	}
}

// sameJSON finds values canonically equal as protocol.CanonicalJSON does, whether their bytes
// are equal or not, and never equal when either is refused (equal bytes included).
func TestSameJSON_IsCanonicalEquality(t *testing.T) {
	values := []string{`{"a":"x y","b":[1,2]}`, ` { "a" : "x y" , "b" : [ 1 , 2 ] } `, `{"b":[1,2],"a":"x\u0020y"}`,
		`{"a":"xy","b":[1,2]}`, `[1 2]`, `[12]`, `"a b"`, `1.0`, `1`, `{"a":1,"a":1}`, ``, `9007199254740993`}
	for _, a := range values {
		for _, b := range values {
			ca, err1 := protocol.CanonicalJSON([]byte(a))
			cb, err2 := protocol.CanonicalJSON([]byte(b))
			want := err1 == nil && err2 == nil && bytes.Equal(ca, cb)
			if got := sameJSON([]byte(a), []byte(b)); got != want {
				t.Errorf("sameJSON(%s, %s) = %v, want %v", a, b, got, want)
			}
		}
	}
}

// agentObject writes what raw writes for an object of one agent_id, escapes included.
func TestAgentObject_IsRaw(t *testing.T) {
	for _, id := range []string{"a", "", "ns:h:n", "<&>", "é\u2028", "q\"\\", "\xff"} {
		if got, want := agentObject(id), raw(Members{"agent_id": raw(id)}); !bytes.Equal(got, want) {
			t.Errorf("agentObject(%q) = %s, want %s", id, got, want)
		}
	}
}

// unquote reads a member as json.Unmarshal into a string does, null and absence included.
func TestUnquote_IsJSONUnmarshal(t *testing.T) {
	for _, v := range []string{``, `"a"`, `"a\u0062"`, `"<é>"`, `null`, `true`, `false`, `1`, `-1`, `{}`, `[]`, ` "a"`, `"a`, `nul`, `x`} {
		var want string
		werr := json.Unmarshal([]byte(v), &want)
		got, ok := unquote(json.RawMessage(v))
		gotb, okb := unquoteBytes([]byte(v))
		if ok != (werr == nil) || got != want || okb != ok || string(gotb) != got {
			t.Errorf("unquote(%q) = %q, %v and %q, %v; json.Unmarshal: %q, %v", v, got, ok, gotb, okb, want, werr)
		}
	}
}

// field finds what payloadOf finds, where protocol's scanner reads the object and where only
// encoding/json does (a duplicate member: the last one).
func TestField_IsPayloadOf(t *testing.T) {
	for _, raw := range []string{`{"agent_id":"a","x":1}`, `{"x":1}`, `{}`, `[1]`, `"s"`, ``, `{"agent_id":"a","agent_id":"b"}`,
		`{"\u0061gent_id":"c"}`, `{"agent_id":{"agent_id":"d"}}`, `{"agent_id":`} {
		m := payloadOf([]byte(raw))
		want, wantFound := m["agent_id"]
		v, found, isObject := field([]byte(raw), "agent_id")
		if !bytes.Equal(v, want) || found != wantFound || isObject != (m != nil) {
			t.Errorf("field(%s) = %s, %v, %v; payloadOf: %s, %v, %v", raw, v, found, isObject, want, wantFound, m != nil)
		}
	}
}
