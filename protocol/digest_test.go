package protocol

import (
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// digestCases are documents whose canonical form Digest streams: long strings with and without
// escapes (surrogate pairs among them, so that a piece may end next to one), unsorted objects
// above and below sortedDepth, arrays, unknown members, and documents refused for a duplicate
// member or a lone surrogate, at every depth.
func digestCases() map[string]string {
	long := strings.Repeat("abcdefgh", 2048)
	esc := strings.Repeat(`line\n\"quoted\"\t\u00e9\ud83d\ude00\/`, 600)
	deep := `"` + long + `"`
	for i := range 8 {
		deep = `{"z` + string(rune('a'+i)) + `":` + deep + `,"a":[` + deep[:min(len(deep), 40)] + `1],"m":"` + esc[:60] + `"}`
	}
	return map[string]string{
		"unsorted long":      `{"event_type":"x","detail":"` + long + `"}`,
		"sorted long":        `{"a":1,"detail":"` + long + `","z":"` + long + `"}`,
		"escaped long":       `{"event_type":"x","detail":"` + esc + `"}`,
		"nested":             deep,
		"arrays":             `{"b":["` + long + `",{"y":"` + esc + `","x":[1,2.5,-0,1e21]}],"a":"` + long + `"}`,
		"escaped names":      `{"\u00e9":"` + long + `","\ud83d\ude00":1,"e":{"\n":"` + esc + `"}}`,
		"duplicate shallow":  `{"a":"` + long + `","b":1,"a":2}`,
		"duplicate deep":     `{"a":{"b":{"c":{"d":{"e":{"f":1,"f":"` + long + `"}}}}}}`,
		"lone surrogate":     `{"a":"` + long + `\ud83d` + long + `"}`,
		"lone surrogate end": `{"a":"` + esc + `\ud83d"}`,
		"empty":              `{}`,
	}
}

// Digest hashes exactly the canonical form Canonical builds, and refuses exactly what it
// refuses, whatever the size of the pieces it hashes.
func TestDigest_HashesTheCanonicalFormItNoLongerBuilds(t *testing.T) {
	defer func(at int) { spillAt = at }(spillAt)
	for name, payload := range digestCases() {
		for _, at := range []int{1, 7, 64, 4096, 32 << 10} {
			spillAt = at
			m := digestMessage(t, payload)
			want, werr := Canonical(m)
			got, gerr := Digest(m)
			if (werr != nil) != (gerr != nil) {
				t.Fatalf("%s, pieces of %d: Canonical says %v, Digest %v", name, at, werr, gerr)
			}
			if werr == nil && got != sha256.Sum256(want) {
				t.Fatalf("%s, pieces of %d: Digest is not the SHA-256 of the canonical form", name, at)
			}
		}
	}
}

// Digest of a 16 MiB message holds no copy of it: what it allocates is a small part of the
// message (it was 3.3 times the message before the canonical form streamed into the hash).
func TestDigest_OfALargeMessageAllocatesNoCopyOfIt(t *testing.T) {
	for name, pad := range map[string]string{
		"plain":   strings.Repeat("a", 16<<20),
		"escaped": strings.Repeat(`a\nb`, 4<<20),
	} {
		m := digestMessage(t, `{"event_type":"x","detail":"`+pad+`"}`)
		if _, err := Digest(m); err != nil { // warms the pools
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := Digest(m); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Fatalf("%s: Digest of a %d MiB message allocated %d KiB", name, len(pad)>>20, grew>>10)
		}
	}
}

// FuzzDigest: Digest, cut into pieces of every size, is the SHA-256 of Canonical's bytes and
// refuses what Canonical refuses.
func FuzzDigest(f *testing.F) {
	for _, s := range digestCases() {
		if len(s) < 4096 {
			f.Add([]byte(s), uint8(1))
		}
	}
	for _, s := range []string{`{"b":[{"z":1,"a":2}],"a":"\u00e9"}`, `{"a":"x\ud83d\ude00\ud83d\ude00y","b":"\u0000"}`,
		`{"a":{"a":{"a":{"a":{"b":1,"a":"` + strings.Repeat(`\t`, 40) + `"}}}}}`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, payload []byte, at uint8) {
		defer func(prev int) { spillAt = prev }(spillAt)
		spillAt = int(at%64) + 1
		m := digestMessage(t, string(payload))
		want, werr := Canonical(m)
		got, gerr := Digest(m)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("pieces of %d: Canonical says %v, Digest %v for %q", spillAt, werr, gerr, payload)
		}
		if werr == nil && got != sha256.Sum256(want) {
			t.Fatalf("pieces of %d: Digest is not the SHA-256 of the canonical form of %q", spillAt, payload)
		}
	})
}

// digestMessage is an event whose payload, and an unknown envelope member, are raw.
func digestMessage(t testing.TB, payload string) *Message {
	t.Helper()
	return &Message{
		Envelope: Envelope{Version: "1.0", MessageID: "0190b3c1-0000-7000-8000-000000000001", Timestamp: "2026-12-06T00:00:00Z",
			TTLSeconds: 60, Sender: Sender{AgentID: "acme:h:a", PeerID: "12D3KooW"}, Recipient: Recipient{AgentID: "acme:h:b"},
			Extra: Extra{"x-ext": json.RawMessage(payload)}},
		Message: Body{Type: TypeEvent, Intent: IntentNotify, Payload: json.RawMessage(payload)},
	}
}

// checkSurrogates, which validates without copying, refuses exactly the string bodies that
// unescape refuses under RFC 8785's rules.
func TestCheckSurrogates_AgreesWithUnescape(t *testing.T) {
	for _, body := range []string{`plain`, `\n\t\"`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83dx`,
		`\ud83d\n`, `\ud83d\u0041`, `a\ud83d\ude00\ud83d`, `\ud83d\ud83d\ude00`, `\\ud83d`, `\\\ud83d\ude00`} {
		_, uerr := unescape(nil, []byte(body), true)
		if cerr := checkSurrogates([]byte(body)); (cerr == nil) != (uerr == nil) {
			t.Errorf("%s: checkSurrogates says %v, unescape %v", body, cerr, uerr)
		}
	}
}
