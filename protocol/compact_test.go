package protocol_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// compactSeeds have white space inside and outside strings, escapes next to quotes, and
// strings longer than a word, so that stringEnd's word-at-a-time skip is crossed.
var compactSeeds = []string{
	`{ "a" : "b c" , "d" : [ 1 , 2 ] }`,
	`{"x":"a \"quoted\" { bracket } and a \\ backslash \\"}`,
	"[ \"tab\\tand newline\\n\" ,\n\t{ \"k\" : \"long enough to fill several eight-byte words\" } ]",
	`{"e":"\u00e9 \ud83d\ude00","f":" leading and trailing "}`,
	`"just a string with  two spaces"`,
	` 12 `,
}

// AppendCompactJSON writes what encoding/json's Compact writes, for every value it accepts.
func TestAppendCompactJSON_WritesWhatCompactWrites(t *testing.T) {
	for _, s := range compactSeeds {
		checkCompact(t, []byte(s))
	}
}

func FuzzAppendCompactJSON(f *testing.F) {
	for _, s := range compactSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkCompact)
}

func checkCompact(t *testing.T, raw []byte) {
	got, err := protocol.AppendCompactJSON([]byte("prefix"), raw)
	if err != nil {
		return // refused for reasons of its own (nesting, UTF-8, numbers): not compared
	}
	var want bytes.Buffer
	want.WriteString("prefix")
	if err := json.Compact(&want, raw); err != nil {
		t.Fatalf("AppendCompactJSON accepted %q, which encoding/json refuses: %v", raw, err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("AppendCompactJSON(%q) = %q, encoding/json's Compact writes %q", raw, got, want.Bytes())
	}
}
