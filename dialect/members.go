package dialect

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/iacp-node/iacp-node/protocol"
)

// This file reads and writes JSON objects as Members without encoding/json on the common
// path: a document is validated and split in one pass of protocol.ObjectMembers, and written
// byte for byte as json.Marshal writes a Members, which it falls back to for anything but the
// plain case.

// parseObject checks that doc is one RFC 8259 JSON object (no duplicate member at any level,
// numbers a double holds: protocol.CanonicalJSON's rules, whose errors it gives) and returns
// its members: views of one copy of doc, so that the caller's bytes are not kept.
func parseObject(d Dialect, doc []byte) (Members, error) {
	what := "document"
	if d != "" {
		what = string(d) + " document"
	}
	m, isObject, err := splitObject(bytes.Clone(doc))
	if err != nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s is not valid JSON: %v", what, err)
	}
	if !isObject {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s must be a JSON object", what)
	}
	return m, nil
}

// splitObject validates raw as parseObject does and, when it is an object, returns its members
// as views of raw (capped, so that an append to one never writes into the next).
func splitObject(raw []byte) (m Members, isObject bool, err error) {
	m = Members{}
	isObject, err = protocol.ObjectMembers(raw, func(name string, v []byte) {
		m[strings.Clone(name)] = v[:len(v):len(v)]
	})
	if err != nil || !isObject {
		return nil, isObject, err
	}
	return m, true, nil
}

// payloadOf decodes a JSON object's members (nil when raw is not an object), as
// json.Unmarshal into Members does: the members are views of raw. What protocol's scanner
// refuses but encoding/json reads (a duplicate member, a number beyond a double) is read by
// encoding/json, as before.
func payloadOf(raw []byte) Members {
	if m, isObject, err := splitObject(raw); err == nil {
		if !isObject {
			return nil
		}
		return m
	}
	var p Members
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	return p
}

// marshal is json.Marshal(m), without reflection when every name and value is plain: the
// members sorted by name, each value compact, with <, > and & escaped. The values must be
// valid JSON, as every value of a parsed document or of raw is: marshal does not check them
// (FromIACP decodes what it writes anyway).
func marshal(m Members) ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	size := 2
	for k, v := range m {
		size += len(k) + len(v) + 4
	}
	return appendMembers(make([]byte, 0, size), m)
}

// appendMembers appends marshal(m) for a non-nil m.
func appendMembers(dst []byte, m Members) ([]byte, error) {
	dst = append(dst, '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendName(dst, k)
		dst = append(dst, ':')
		v := m[k]
		if !compactPlain(v) {
			var err error
			if v, err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
		dst = append(dst, v...)
	}
	return append(dst, '}'), nil
}

// appendName appends k as json.Marshal writes a member name.
func appendName(dst []byte, k string) []byte {
	if plain([]byte(k)) {
		dst = append(dst, '"')
		dst = append(dst, k...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(k) // a string always encodes
	return append(dst, b...)
}

// compactPlain reports whether v, a valid JSON value, is what json.Marshal writes for it as a
// json.RawMessage: not empty, no white space outside strings, and none of the bytes it escapes
// (<, >, &, and the first byte of U+2028 and U+2029).
func compactPlain(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	inString, escaped := false, false
	for _, c := range v {
		switch {
		case c == '<' || c == '>' || c == '&' || c == 0xE2:
			return false
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
