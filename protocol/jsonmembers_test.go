package protocol_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// FuzzObjectMembers: ObjectMembers accepts exactly what CanonicalJSON accepts, refuses with the
// same error, and splits an object into the members encoding/json finds, verbatim.
func FuzzObjectMembers(f *testing.F) {
	for _, s := range []string{`{"a":1.50,"b":1e21}`, `{"b":[{"z":1,"a":2}],"a":"\u00e9 \u003c\u0026"}`,
		`{"n":-0,"m":0.1e-6,"k":123456789012345678901}`, `[1,"x",null,true,false]`, `"s\n"`, ` { "a" : { } , "b" : [ 1 , 2 ] } `,
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"\u0061":1,"a":2}`, `{"a\ud800":1}`, `{"x":9007199254740993}`, `null`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := map[string]json.RawMessage{}
		isObject, err := protocol.ObjectMembers(raw, func(name string, v []byte) {
			if _, dup := got[name]; dup {
				t.Fatalf("member %q given twice", name)
			}
			got[string([]byte(name))] = v
		})
		_, cerr := protocol.CanonicalJSON(raw)
		if (err == nil) != (cerr == nil) || err != nil && err.Error() != cerr.Error() {
			t.Fatalf("ObjectMembers(%q) = %v; CanonicalJSON says %v", raw, err, cerr)
		}
		if err != nil {
			return
		}
		var want map[string]json.RawMessage
		jerr := json.Unmarshal(raw, &want)
		if isObject != (jerr == nil && want != nil) {
			t.Fatalf("ObjectMembers(%q): object %v; encoding/json: %v, %v", raw, isObject, want, jerr)
		}
		if len(got) != len(want) {
			t.Fatalf("ObjectMembers(%q) = %d members; encoding/json finds %d", raw, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("member %q of %q: %q, encoding/json %q", k, raw, got[k], v)
			}
		}
	})
}
