package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/iacp-node/iacp-node/protocol"
)

// Refusal returns an EventRefused entry for input the node refuses or cannot authenticate:
// raw is the document as received, peer the authenticated libp2p peer id it came from. The
// entry records the peer, len(raw), the hex SHA-256 of raw, code, and reason clipped to
// MaxRefusalReasonBytes on a UTF-8 boundary (invalid UTF-8 replaced by U+FFFD; ending in "…" when clipped). It never records
// the payload or any field of the document: set MessageID yourself only once you have
// validated it, and do not build reason from the document's contents.
func Refusal(raw []byte, peer string, code protocol.Code, reason string) Entry {
	sum := sha256.Sum256(raw)
	return Entry{
		Event:  EventRefused,
		Peer:   peer,
		Size:   len(raw),
		SHA256: hex.EncodeToString(sum[:]),
		Code:   code,
		Reason: clip(reason, MaxRefusalReasonBytes),
	}
}

// clip returns s as valid UTF-8 (invalid bytes become U+FFFD, as JSON would write them) cut
// to at most limit bytes on a rune boundary, ending in "…" when cut.
func clip(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	const mark = "…"
	n := limit - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
