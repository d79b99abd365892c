package protocol_test

import (
	"encoding/json"

	"github.com/gowebpki/jcs"

	"github.com/iacp-node/iacp-node/protocol"
)

// referenceCanonical is the canonical form computed the slow, obvious way: the document built
// as nested maps, encoded by encoding/json, canonicalised by github.com/gowebpki/jcs. The
// direct writer in canon.go must produce the same bytes.
func referenceCanonical(m *protocol.Message) ([]byte, error) {
	obj := func(extra protocol.Extra, skip string, known ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i+1 < len(known); i += 2 {
			name := known[i].(string)
			switch v := known[i+1].(type) {
			case string:
				if v != "" {
					out[name] = v
				}
			case int64:
				if v != 0 {
					out[name] = v
				}
			case json.RawMessage:
				if len(v) != 0 {
					out[name] = v
				}
			default: // known objects are present unless the document had them as null
				if _, null := extra[name]; !null {
					out[name] = v
				}
			}
		}
		// Extra holds unknown members, and known ones that were null, empty or zero: a set
		// known field wins over those.
		for name, raw := range extra {
			if _, set := out[name]; (skip == "" || name != skip) && !set {
				out[name] = raw
			}
		}
		return out
	}
	e := &m.Envelope
	doc := obj(m.Extra, "",
		"envelope", obj(e.Extra, "",
			"version", e.Version,
			"message_id", e.MessageID,
			"correlation_id", e.CorrelationID,
			"sender", obj(e.Sender.Extra, "identity_sig",
				"agent_id", e.Sender.AgentID,
				"peer_id", e.Sender.PeerID),
			"recipient", obj(e.Recipient.Extra, "",
				"agent_id", e.Recipient.AgentID,
				"channel", e.Recipient.Channel),
			"timestamp", e.Timestamp,
			"ttl_seconds", e.TTLSeconds),
		"message", obj(m.Message.Extra, "",
			"type", string(m.Message.Type),
			"intent", string(m.Message.Intent),
			"payload", m.Message.Payload))
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}
