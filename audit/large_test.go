package audit

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// An entry with a large payload is written without a copy of it when the payload is compact
// (the line's head, the payload as it is, the rest), reads back as the line appendEntry
// writes, chains and verifies; it leaves no buffer of its size behind in the log, and the next
// entries reuse a small one. A payload with white space is compacted as before.
func TestAppend_ALargePayloadIsWrittenWithoutACopy(t *testing.T) {
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := json.RawMessage(`{"detail":"` + strings.Repeat("a", 4<<20) + `"}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := l.Append(Entry{Event: EventReceived, MessageID: "m1", Payload: big}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("appending an entry with a %d MiB payload allocated %d KiB: a copy of it", len(big)>>20, grew>>10)
	}
	if err := l.Append(Entry{Event: EventReceived, MessageID: "m1b", Payload: json.RawMessage("{ \"a\" : [1, 2] , \"b\":\"" + strings.Repeat("b", 1<<20) + "\" }")}); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	kept := cap(l.scratch)
	l.mu.Unlock()
	if kept > maxScratch {
		t.Fatalf("the log kept a %d KiB buffer after a 4 MiB entry", kept>>10)
	}
	if err := l.Append(Entry{Event: EventReceived, MessageID: "m2", Payload: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(l.dir); err != nil || rep.Broken != nil || rep.TornTail || rep.Entries != 3 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	var got []Entry
	if err := Tail(t.Context(), l.dir, 0, false, func(e Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0].Payload) != string(big) || string(got[1].Payload) != `{"a":[1,2],"b":"`+strings.Repeat("b", 1<<20)+`"}` {
		t.Fatalf("read back %d entries, payloads of %d and %d bytes", len(got), len(got[0].Payload), len(got[1].Payload))
	}
}

// The time of a file's last entry is read from the start of its line: a line carrying a 16 MiB
// payload is not read whole (retention read it, and decoded it, at every rotation).
func TestNewestTime_ReadsTheStartOfALongLastLineOnly(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 10, 0, 0, 123, time.UTC)
	for _, p := range []string{`{"a":1}`, `{"detail":"` + strings.Repeat("a", 8<<20) + `"}`} {
		if err := l.Append(Entry{Event: EventReceived, Time: at, MessageID: "m", Payload: json.RawMessage(p)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := newestTime(filepath.Join(dir, fileName(1)))
	runtime.ReadMemStats(&after)
	if err != nil || !got.Equal(at) {
		t.Fatalf("newest time %v (%v), want %v", got, err, at)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("reading the time of an 8 MiB line allocated %d KiB", grew>>10)
	}
}
