package a2abridge

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/iacp-node/iacp-node/protocol"
)

// PayloadOf maps the parts of an A2A message or artifact to an IACP payload: the text parts,
// joined by newlines, are "text"; the data parts are merged in order (a later key wins); the
// file parts are listed under "files" as {name, mime_type, uri or bytes}.
func PayloadOf(parts []a2a.Part) map[string]any {
	out := map[string]any{}
	var texts []string
	var files []any
	for _, p := range parts {
		switch p := p.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case a2a.DataPart:
			maps.Copy(out, p.Data)
		case a2a.FilePart:
			files = append(files, fileOf(p))
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

// fileOf is a file part as a payload entry.
func fileOf(p a2a.FilePart) map[string]any {
	f := map[string]any{}
	put := func(k, v string) {
		if v != "" {
			f[k] = v
		}
	}
	switch c := p.File.(type) {
	case a2a.FileURI:
		put("name", c.Name)
		put("mime_type", c.MimeType)
		put("uri", c.URI)
	case a2a.FileBytes:
		put("name", c.Name)
		put("mime_type", c.MimeType)
		put("bytes", c.Bytes)
	}
	return f
}

// PartsOf maps an IACP payload to A2A parts: its "text", when a string, as a text part, and
// the payload as one data part. Without whole, the data part leaves out "text" and the "a2a"
// ids, and is left out when nothing else remains (what a request to an A2A agent carries).
func PartsOf(payload map[string]any, whole bool) []a2a.Part {
	var parts []a2a.Part
	if t, ok := payload["text"].(string); ok {
		parts = append(parts, a2a.TextPart{Text: t})
	}
	data := payload
	if !whole {
		data = maps.Clone(payload)
		delete(data, "text")
		delete(data, PayloadKey)
	}
	if len(data) > 0 || len(parts) == 0 {
		parts = append(parts, a2a.DataPart{Data: data})
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
func errorParts(err error) []a2a.Part {
	code := protocol.CodeOf(err)
	msg := err.Error()
	var e *protocol.Error
	if errors.As(err, &e) && e.Message != "" {
		msg = e.Message
	}
	return []a2a.Part{
		a2a.TextPart{Text: string(code) + ": " + msg},
		a2a.DataPart{Data: map[string]any{"code": string(code), "message": msg, "retryable": code.Retryable()}},
	}
}
