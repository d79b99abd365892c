package audit

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// appendEntry appends e as one line of the log (without its newline): the members of Entry
// in their order, empty ones left out as their omitempty tags say. It is json.Marshal's
// output for every entry whose strings and payload hold none of <, >, &, U+2028, U+2029 and
// invalid UTF-8 (encoding/json escapes them; this writes them as they are, and U+FFFD for
// invalid UTF-8), and the same entry for every other, written without reflection: an entry on
// the request path cost 15 µs in json.Marshal, most of it validating its payload with
// encoding/json's scanner, and a round trip records four (docs/node.md). The payload is
// checked and compacted by the protocol's scanner, so that a line is always one valid JSON
// value. The rare entries with a Retention, and times json.Marshal refuses, take
// json.Marshal.
func appendEntry(dst []byte, e *Entry) ([]byte, error) {
	if !plainEntry(e) {
		c := *e // a copy, so that only this rare path moves an entry to the heap
		line, err := json.Marshal(&c)
		return append(dst, line...), err
	}
	dst = appendMembers(dst, e)
	if len(e.Payload) > 0 {
		dst = append(dst, `,"payload":`...)
		var err error
		if dst, err = protocol.AppendCompactJSON(dst, e.Payload); err != nil {
			return dst, err
		}
	}
	return appendTail(dst, e), nil
}

// plainEntry reports whether appendEntry writes e member by member (appendMembers, the
// payload, appendTail) rather than with json.Marshal.
func plainEntry(e *Entry) bool {
	return e.Retention == nil && e.Time.Year() >= 0 && e.Time.Year() <= 9999
}

// appendHead appends the members of a plain entry's line before its payload, and the
// payload's name: the line goes on with the payload, compact, as it is, then appendTail.
func appendHead(dst []byte, e *Entry) []byte {
	return append(appendMembers(dst, e), `,"payload":`...)
}

// appendMembers appends the opening brace and the members before the payload.
func appendMembers(dst []byte, e *Entry) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"time":"`...)
	dst = e.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","event":`...)
	dst = protocol.AppendJSONString(dst, string(e.Event))
	dst = appendField(dst, "message_id", e.MessageID)
	dst = appendField(dst, "correlation_id", e.CorrelationID)
	dst = appendField(dst, "type", e.Type)
	dst = appendField(dst, "intent", e.Intent)
	dst = appendField(dst, "from", e.From)
	dst = appendField(dst, "to", e.To)
	dst = appendField(dst, "code", string(e.Code))
	dst = appendField(dst, "reason", e.Reason)
	return appendField(dst, "by", e.By)
}

// appendTail appends the members of e's line after its payload, and the closing brace.
func appendTail(dst []byte, e *Entry) []byte {
	dst = appendField(dst, "payload_sha256", e.PayloadSHA256)
	dst = appendField(dst, "peer", e.Peer)
	if e.Size != 0 {
		dst = strconv.AppendInt(append(dst, `,"size":`...), int64(e.Size), 10)
	}
	dst = appendField(dst, "sha256", e.SHA256)
	if e.Suppressed != 0 {
		dst = strconv.AppendInt(append(dst, `,"suppressed":`...), int64(e.Suppressed), 10)
	}
	dst = append(dst, `,"prev":`...)
	dst = protocol.AppendJSONString(dst, e.Prev)
	return append(dst, '}')
}

// appendField appends `,"name":"value"` unless value is empty.
func appendField(dst []byte, name, value string) []byte {
	if value == "" {
		return dst
	}
	dst = append(append(append(dst, `,"`...), name...), `":`...)
	return protocol.AppendJSONString(dst, value)
}
