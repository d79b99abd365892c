package audit

import (
	"encoding/json"
	"strings"
	"testing"
)

// An entry with a large payload leaves no buffer of its size behind in the log: the next
// entries reuse a small one.
func TestAppend_ALargePayloadLeavesNoBufferBehind(t *testing.T) {
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := json.RawMessage(`{"detail":"` + strings.Repeat("a", 4<<20) + `"}`)
	if err := l.Append(Entry{Event: EventReceived, MessageID: "m1", Payload: big}); err != nil {
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
	if _, err := Verify(l.dir); err != nil {
		t.Fatal(err)
	}
}
