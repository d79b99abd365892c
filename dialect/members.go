package dialect

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/iacp-node/iacp-node/protocol"
)

// This file reads and writes JSON objects as Members without encoding/json on the common
// path: a document is validated and split in one pass of protocol.ObjectMembers, and written
// byte for byte as json.Marshal writes a Members, which it falls back to for anything but the
// plain case.

// parseObject checks that doc is one RFC 8259 JSON object (no duplicate member at any level,
// numbers a double holds: protocol.CanonicalJSON's rules, whose errors it gives) in UTF-8, as
// protocol.DecodeJSON requires of an IACP document, and returns its members: they and their
// names are views of one copy of doc, so that the caller's bytes are not kept, which nothing
// writes (a value is capped: an append to it copies). (A member name in invalid UTF-8 could
// not come back: the extension, JSON, names it in UTF-8.)
func parseObject(d Dialect, doc []byte) (Members, error) { return readObject(d, doc, true) }

// readObject is parseObject; without own, the members and their names are views of doc itself.
func readObject(d Dialect, doc []byte, own bool) (Members, error) {
	what := "document"
	if d != "" {
		what = string(d) + " document"
	}
	raw := doc
	if own {
		raw = bytes.Clone(doc)
	}
	m, isObject, err := splitObject(raw)
	switch {
	case err != nil:
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s is not valid JSON: %v", what, err)
	case !isObject:
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s must be a JSON object", what)
	case !utf8.Valid(doc):
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s is not valid UTF-8", what)
	}
	return m, nil
}

// splitObject validates raw as parseObject does and, when it is an object, returns its members
// as views of raw (capped, so that an append to one never writes into the next). Their names
// may point into raw too.
func splitObject(raw []byte) (m Members, isObject bool, err error) {
	// The members are listed first, so that the map is made once, of its size.
	type member struct {
		name string
		v    []byte
	}
	var stack [16]member
	list := stack[:0]
	isObject, err = protocol.ObjectMembers(raw, func(name string, v []byte) {
		list = append(list, member{name, v[:len(v):len(v)]})
	})
	if err != nil || !isObject {
		return nil, isObject, err
	}
	m = make(Members, len(list))
	for _, e := range list {
		m[e.name] = e.v
	}
	return m, true, nil
}

// payloadOf decodes a JSON object's members (nil when raw is not an object), as
// json.Unmarshal into Members does, for the caller to read while it holds raw: the members,
// and their names, may be views of raw (copy a name to keep it beyond raw's use). What
// protocol's scanner refuses but encoding/json reads (a duplicate member, a number beyond a
// double) is read by encoding/json, as before.
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

// field is payloadOf(raw)[name] without the map: the value of member name of the object raw
// (a view of raw), whether it is there, and whether raw is an object at all.
func field(raw []byte, name string) (v []byte, found, isObject bool) {
	isObject, err := protocol.ObjectMembers(raw, func(n string, val []byte) {
		if n == name {
			v, found = val[:len(val):len(val)], true
		}
	})
	if err != nil {
		m := payloadOf(raw)
		v, found = m[name]
		return v, found, m != nil
	}
	return v, found, isObject
}

// strField is str(payloadOf(raw), name), without the map.
func strField(raw []byte, name string) string {
	v, _, _ := field(raw, name)
	s, _ := unquote(v)
	return s
}

// marshal is json.Marshal(m), without reflection: the members sorted by name, each value
// compact (checked by encoding/json's own Compact), with <, > and & escaped.
func marshal(m Members) ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	size := 2
	for k, v := range m {
		size += len(k) + len(v) + 4
	}
	b := bytes.NewBuffer(make([]byte, 0, size))
	if err := writeMembers(b, m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeMembers writes marshal(m) for a non-nil m.
func writeMembers(b *bytes.Buffer, m Members) error {
	var stack [16]string
	keys := stack[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // as json.Marshal sorts names: by their bytes
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, k)
		b.WriteByte(':')
		if err := writeValue(b, m[k]); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writeString writes s as json.Marshal writes a string.
func writeString(b *bytes.Buffer, s string) {
	if plainText(s) {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// writeValue writes v as json.Marshal writes a json.RawMessage: compact, and checked. Only a
// value holding a byte it escapes (<, >, &, the first of U+2028 and U+2029), or none, takes
// json.Marshal itself.
func writeValue(b *bytes.Buffer, v json.RawMessage) error {
	if plainString(v) {
		b.Write(v) // a string that is as json.Marshal writes it, as most values are
		return nil
	}
	if len(v) > 0 && !htmlEscaped(v) {
		return json.Compact(b, v)
	}
	enc, err := json.Marshal(v)
	if err == nil {
		b.Write(enc)
	}
	return err
}

// htmlEscaped reports whether v holds a byte that json.Marshal escapes in a value: <, >, &,
// or 0xE2, with which U+2028 and U+2029 begin.
func htmlEscaped(v []byte) bool {
	for _, c := range v {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}

// marshalExtension is json.Marshal(ext), written as marshal writes Members.
func marshalExtension(ext *Extension) ([]byte, error) {
	b := bytes.NewBuffer(make([]byte, 0, 256))
	b.WriteString(`{"name":`)
	writeString(b, string(ext.Name))
	if ext.Priority != "" {
		b.WriteString(`,"priority":`)
		writeString(b, ext.Priority)
	}
	for _, f := range []struct {
		name    string
		members Members
		names   []string
	}{{"members", ext.Members, nil}, {"absent", nil, ext.Absent},
		{"payload_replaced", ext.PayloadReplaced, nil}, {"payload_added", nil, ext.PayloadAdded}} {
		switch {
		case len(f.members) > 0:
			b.WriteString(`,"` + f.name + `":`)
			if err := writeMembers(b, f.members); err != nil {
				return nil, err
			}
		case len(f.names) > 0:
			b.WriteString(`,"` + f.name + `":`)
			writeStrings(b, f.names)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeStrings writes a JSON array of strings.
func writeStrings(b *bytes.Buffer, names []string) {
	b.WriteByte('[')
	for i, s := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, s)
	}
	b.WriteByte(']')
}
