package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/iacp-node/iacp-node/protocol"
)

// A refused document is recorded by who sent it, its size and its hash: never its payload,
// nor any field read from it.
func TestRefusalRecordsNoPayloadNorDocumentFields(t *testing.T) {
	raw := []byte(`{"envelope":{"message_id":"forged-id","sender":{"agent_id":"a:h:mallory"}},` +
		`"message":{"type":"request","intent":"x","payload":{"secret":"PAYLOAD-BYTES"}}}`)
	const peer = "12D3KooWPeer"
	e := Refusal(raw, peer, protocol.CodeIdentityInvalid, "signature verification failed")
	sum := sha256.Sum256(raw)
	if e.Event != EventRefused || e.Peer != peer || e.Size != len(raw) || e.SHA256 != hex.EncodeToString(sum[:]) ||
		e.Code != protocol.CodeIdentityInvalid || e.Reason != "signature verification failed" {
		t.Fatalf("refusal entry: %+v", e)
	}
	if e.MessageID != "" || e.From != "" || e.Intent != "" || e.Type != "" || e.Payload != nil || e.PayloadSHA256 != "" {
		t.Fatalf("refusal entry copied fields of the unauthenticated document: %+v", e)
	}

	dir := t.TempDir()
	l := openLog(t, dir) // payloads are kept by default: a refusal has none to keep
	e.Suppressed = 41
	if err := l.Append(e); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, fileName(1)))
	for _, leak := range []string{"PAYLOAD-BYTES", "forged-id", "mallory", `"payload"`} {
		if bytes.Contains(b, []byte(leak)) {
			t.Fatalf("the log holds %q from the refused document: %s", leak, b)
		}
	}
	for _, field := range []string{`"peer":"` + peer + `"`, `"size":` + strconv.Itoa(len(raw)), `"sha256":"` + e.SHA256 + `"`, `"suppressed":41`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Fatalf("the refusal line lacks %s: %s", field, b)
		}
	}
}

func TestRefusalClipsTheReasonOnARuneBoundary(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
	}{
		{"ascii", strings.Repeat("a", 10_000)},
		{"three-byte runes", strings.Repeat("€", 1000)},
		{"four-byte runes after one byte", "x" + strings.Repeat("𝄞", 500)},
		{"invalid UTF-8, replaced as JSON would", strings.Repeat("\xffa", 600)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Refusal(nil, "p", protocol.CodePayloadInvalid, tc.reason).Reason
			if len(got) > MaxRefusalReasonBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
				t.Fatalf("clipped reason: %d bytes, valid UTF-8 %v: %q", len(got), utf8.ValidString(got), got)
			}
			if len(got) < MaxRefusalReasonBytes-6 {
				t.Fatalf("clipped to %d bytes, more than a rune short of %d", len(got), MaxRefusalReasonBytes)
			}
		})
	}
	if got := Refusal(nil, "p", protocol.CodePayloadInvalid, strings.Repeat("b", MaxRefusalReasonBytes)).Reason; len(got) != MaxRefusalReasonBytes || strings.HasSuffix(got, "…") {
		t.Fatalf("a reason of exactly %d bytes is kept whole: %d bytes", MaxRefusalReasonBytes, len(got))
	}
}
