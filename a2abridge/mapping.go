package a2abridge

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/iacp-node/iacp-node/protocol"
)

// PayloadOf maps the parts of an A2A message or artifact to an IACP payload: the text parts,
// joined by newlines, are "text"; the data parts are merged in order (a later key wins; data
// that is not a JSON object goes under "data"); the file parts (a URL, or raw bytes) are
// listed under "files" as {name, mime_type, uri or bytes (base64)}.
func PayloadOf(parts []*a2a.Part) map[string]any {
	out := map[string]any{}
	var texts []string
	var files []any
	for _, p := range parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case a2a.Text:
			texts = append(texts, string(c))
		case a2a.Data:
			if obj, ok := c.Value.(map[string]any); ok {
				maps.Copy(out, obj)
			} else {
				out["data"] = c.Value
			}
		case a2a.URL:
			files = append(files, fileOf(p, "uri", string(c)))
		case a2a.Raw:
			files = append(files, fileOf(p, "bytes", base64.StdEncoding.EncodeToString(c)))
		}
	}
	if len(texts) > 0 {
		out["text"] = strings.Join(texts, "\n")
	}
	if len(files) > 0 {
		out["files"] = files
	}
	return out
}

// fileOf is a file part as a payload entry: its name and media type, and key (uri or bytes)
// with value.
func fileOf(p *a2a.Part, key, value string) map[string]any {
	f := map[string]any{key: value}
	if p.Filename != "" {
		f["name"] = p.Filename
	}
	if p.MediaType != "" {
		f["mime_type"] = p.MediaType
	}
	return f
}

// PartsOf maps an IACP payload to A2A parts: its "text", when a string, as a text part, and
// the payload as one data part. Without whole, the data part leaves out "text" and the "a2a"
// ids, and is left out when nothing else remains (what a request to an A2A agent carries).
func PartsOf(payload map[string]any, whole bool) []*a2a.Part {
	var parts []*a2a.Part
	if t, ok := payload["text"].(string); ok {
		parts = append(parts, a2a.NewTextPart(t))
	}
	data := payload
	if !whole {
		data = maps.Clone(payload)
		delete(data, "text")
		delete(data, PayloadKey)
	}
	if len(data) > 0 || len(parts) == 0 {
		parts = append(parts, a2a.NewDataPart(data))
	}
	return parts
}

// decode reads an IACP message's payload as a JSON object.
func decode(m *protocol.Message) (map[string]any, error) {
	out := map[string]any{}
	if err := protocol.DecodePayload(m, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// encode is a payload as the raw JSON of a message.
func encode(payload map[string]any) (json.RawMessage, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "payload: %w", err)
	}
	return raw, nil
}

// errorParts are the parts of a failed task's status message: "CODE: message" as text, and
// {code, message, retryable} as data.
func errorParts(err error) []*a2a.Part {
	code := protocol.CodeOf(err)
	msg := err.Error()
	var e *protocol.Error
	if errors.As(err, &e) && e.Message != "" {
		msg = e.Message
	} else if after, ok := strings.CutPrefix(msg, string(code)+": "); ok {
		msg = after
	}
	return []*a2a.Part{
		a2a.NewTextPart(string(code) + ": " + msg),
		a2a.NewDataPart(map[string]any{"code": string(code), "message": msg, "retryable": code.Retryable()}),
	}
}
