package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// sameJSON reports whether a and b decode to the same value (numbers compared as written).
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	decode := func(raw []byte) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s does not decode: %v", raw, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// A response's status is written in front of its body's members, compacted, and means what
// merging through a map meant; a body that already has a status, that is not one strict JSON
// object, or that has duplicate names is left to the map (which keeps its errors and its way
// with duplicates).
func TestSpliceMembers_WritesWhatMergingThroughAMapWrites(t *testing.T) {
	status := map[string]any{"status": ResponseAccepted}
	for _, tc := range []struct {
		body, want string // want "" means the splice declines
	}{
		{`{}`, `{"status":"accepted"}`},
		{`{"answer":"Paris"}`, `{"status":"accepted","answer":"Paris"}`},
		{" \n{ \"a\" : [1, 2.50] ,\t\"b\":{\"c\":\"<&> \\u00e9\"} } ", `{"status":"accepted","a":[1,2.50],"b":{"c":"<&> \u00e9"}}`},
		{`{"status":"done","x":1}`, ""},
		{`{"a":1,"a":2}`, ""},
		{`{"a":{"b":1,"b":2}}`, ""},
		{`{"a":}`, ""},
		{`{} {}`, ""},
		{`[1]`, ""},
		{``, ""},
	} {
		got, ok := spliceMembers([]byte(tc.body), status)
		if tc.want == "" {
			if ok {
				t.Errorf("%q: spliced to %s, want it left to the map", tc.body, got)
			}
			continue
		}
		if !ok || string(got) != tc.want {
			t.Errorf("%q: got %s (%v), want %s", tc.body, got, ok, tc.want)
			continue
		}
		byMap, err := mergeByMap([]byte(tc.body), status)
		if err != nil || !sameJSON(t, got, byMap) {
			t.Errorf("%q: spliced %s, the map wrote %s (%v)", tc.body, got, byMap, err)
		}
	}
}

// Whatever the body, a splice means what merging through a map means.
func FuzzSpliceMembers(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":1}`, `{"status":1}`, ` {"a" : [true, null, "x\"y"], "b": {"c": -1e3}} `, `{"a":1,"a":2}`, `[]`} {
		f.Add([]byte(seed))
	}
	set := map[string]any{"status": "failed", "detail": map[string]any{"why": "<tag>"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := spliceMembers(body, set)
		if !ok {
			return
		}
		if !json.Valid(got) || !bytes.HasPrefix(got, []byte(`{"detail":{"why":"\u003ctag\u003e"},"status":"failed"`)) {
			t.Fatalf("%q spliced to %s", body, got)
		}
		byMap, err := mergeByMap(body, set)
		if err != nil {
			t.Fatalf("%q spliced to %s, but the map refuses it: %v", body, got, err)
		}
		if !sameJSON(t, got, byMap) {
			t.Fatalf("%q: spliced %s, the map wrote %s", body, got, byMap)
		}
	})
}

// BenchmarkResponseMerge is what a response's body costs to merge its status into: a 1 KiB
// json.RawMessage body, spliced, against merging it through a map.
func BenchmarkResponseMerge(b *testing.B) {
	body := json.RawMessage(`{"result":"` + string(bytes.Repeat([]byte("x"), 1000)) + `","n":42,"tags":["a","b"]}`)
	status := map[string]any{"status": ResponseAccepted}
	b.Run("splice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mergeObject(body, status); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mergeByMap(body, status); err != nil {
				b.Fatal(err)
			}
		}
	})
}
