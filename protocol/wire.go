package protocol

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// objBuilder writes one object of the known structure, either as wire JSON (known members in
// the draft's order, then unknown ones sorted by name) or in RFC 8785 canonical form (every
// member sorted by the UTF-16 code units of its name). Callers add the known members in the
// order of the form they write: the draft's order, or sorted for canonical form.
//
// An object without unknown members, the common case, is written straight into the output.
// One with unknown members is collected first and then ordered.
//
// Presence is kept exactly: a known member the document had as null or as an empty string
// or zero is kept in Extra, verbatim. A known field that is set wins over an Extra member of
// the same name; one that is zero (empty) lets the Extra member be written instead. So a
// decoded document re-encodes to the same members, and a field set later (Builder.Seal
// filling a version that was null) replaces the placeholder. A known object (envelope,
// sender, ...) that the document had as null stays null.
type objBuilder struct {
	form
	extra Extra
	dst   []byte
	n     int         // members written directly
	ms    []outMember // members collected, when there are unknown ones
	known []string    // names of the known members collected, which Extra must not repeat
	err   error
}

// form is how a document is written: wire JSON or RFC 8785 canonical form (canon), with or
// without sender.identity_sig (unsigned), and for Digest the hash that the canonical form
// streams into as it is written (sink; nil otherwise).
type form struct {
	canon, unsigned bool
	sink            *digestSink
}

// The forms of a document: on the wire, and what a signature covers.
var (
	wireForm  = form{}
	canonForm = form{canon: true, unsigned: true}
)

type memberKind uint8

const (
	kindStr memberKind = iota
	kindInt
	kindRaw
	kindObj
)

type outMember struct {
	name string
	kind memberKind
	str  string
	num  int64
	raw  []byte
	obj  objectWriter
}

// objectWriter is implemented by the known object types.
type objectWriter interface {
	appendTo(dst []byte, f form) ([]byte, error)
}

func newObjBuilder(dst []byte, f form, extra Extra) objBuilder {
	b := objBuilder{form: f, extra: extra, dst: append(dst, '{')}
	if len(extra) > 0 {
		b.ms = make([]outMember, 0, 8+len(extra))
	}
	return b
}

func (b *objBuilder) shadowed(name string) bool {
	if len(b.extra) == 0 {
		return false
	}
	_, ok := b.extra[name]
	return ok
}

func (b *objBuilder) name(name string) {
	if b.n > 0 {
		b.dst = append(b.dst, ',')
	}
	b.n++
	b.dst = appendCanonString(b.dst, name)
	b.dst = append(b.dst, ':')
}

// str adds a string member unless it is empty.
func (b *objBuilder) str(name, v string) {
	switch {
	case v == "":
	case b.ms != nil:
		b.ms = append(b.ms, outMember{name: name, kind: kindStr, str: v})
		b.known = append(b.known, name)
	default:
		b.name(name)
		b.dst = appendCanonString(b.dst, v)
	}
}

// int adds an integer member unless it is zero.
func (b *objBuilder) int(name string, v int64) {
	switch {
	case v == 0:
	case b.ms != nil:
		b.ms = append(b.ms, outMember{name: name, kind: kindInt, num: v})
		b.known = append(b.known, name)
	default:
		b.name(name)
		b.dst = b.appendInt(b.dst, v)
	}
}

func (b *objBuilder) appendInt(dst []byte, v int64) []byte {
	if b.canon {
		return appendCanonInt(dst, v)
	}
	return strconv.AppendInt(dst, v, 10)
}

// obj adds a known object member; known objects are always present, unless the document
// had them as null (then Extra holds the null).
func (b *objBuilder) obj(name string, w objectWriter) {
	switch {
	case b.err != nil || b.shadowed(name):
	case b.ms != nil:
		b.ms = append(b.ms, outMember{name: name, kind: kindObj, obj: w})
		b.known = append(b.known, name)
	default:
		b.name(name)
		b.dst, b.err = w.appendTo(b.dst, b.form)
		b.err = atPath(name, b.err)
	}
}

// raw adds a member holding raw JSON; an empty value is left out.
func (b *objBuilder) raw(name string, v []byte) {
	switch {
	case b.err != nil || len(v) == 0:
	case b.ms != nil:
		b.ms = append(b.ms, outMember{name: name, kind: kindRaw, raw: v})
		b.known = append(b.known, name)
	default:
		b.name(name)
		b.dst, b.err = b.appendRaw(b.dst, v)
		b.err = atPath(name, b.err)
	}
}

func (b *objBuilder) appendRaw(dst, v []byte) ([]byte, error) {
	if len(v) == 0 {
		// An unknown member without a value is a caller's bug; writing null would sign
		// something the caller never said.
		return dst, errors.New("unknown member has no JSON value")
	}
	if b.canon {
		return appendCanonRawTo(dst, v, b.sink)
	}
	return appendCompact(dst, v)
}

// finish adds the unknown members except skip (none when skip is ""; a member may be named
// ""), and returns the output with the object appended.
func (b *objBuilder) finish(skip string) ([]byte, error) {
	if b.err != nil {
		return b.dst, b.err
	}
	if b.ms == nil {
		return append(b.dst, '}'), nil
	}
	known := len(b.ms)
	for name, v := range b.extra {
		if (skip == "" || name != skip) && !slices.Contains(b.known, name) {
			b.ms = append(b.ms, outMember{name: name, kind: kindRaw, raw: v})
		}
	}
	if b.canon {
		slices.SortFunc(b.ms, func(x, y outMember) int { return compareUTF16(x.name, y.name) })
		for i := 1; i < len(b.ms); i++ {
			if compareUTF16(b.ms[i-1].name, b.ms[i].name) == 0 {
				return b.dst, fmt.Errorf("duplicate member %q", b.ms[i].name)
			}
		}
	} else {
		slices.SortFunc(b.ms[known:], func(x, y outMember) int { return strings.Compare(x.name, y.name) })
	}
	for i := range b.ms {
		m := &b.ms[i]
		b.name(m.name)
		var err error
		switch m.kind {
		case kindStr:
			b.dst = appendCanonString(b.dst, m.str)
		case kindInt:
			b.dst = b.appendInt(b.dst, m.num)
		case kindObj:
			b.dst, err = m.obj.appendTo(b.dst, b.form)
		case kindRaw:
			b.dst, err = b.appendRaw(b.dst, m.raw)
		}
		if err != nil {
			return b.dst, atPath(m.name, err)
		}
	}
	return append(b.dst, '}'), nil
}

// appendDoc writes the document in form f.
func (m *Message) appendDoc(dst []byte, f form) ([]byte, error) {
	return m.appendTo(dst, f)
}

// sizeHint is about the encoded size of m, so that encoding it allocates once: its strings,
// payload and unknown members, plus the member names and punctuation of a document (about
// 250 bytes) and some room for escapes.
func (m *Message) sizeHint() int {
	e, b := &m.Envelope, &m.Message
	n := 320 + len(e.Version) + len(e.MessageID) + len(e.CorrelationID) + len(e.Sender.AgentID) +
		len(e.Sender.IdentitySig) + len(e.Sender.PeerID) + len(e.Recipient.AgentID) +
		len(e.Recipient.Channel) + len(e.Timestamp) + len(b.Type) + len(b.Intent) + len(b.Payload)
	for _, x := range [...]Extra{m.Extra, e.Extra, e.Sender.Extra, e.Recipient.Extra, b.Extra} {
		for k, v := range x {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// The appendTo methods add the known members in the draft's order for the wire, and sorted by
// name for canonical form.

func (m *Message) appendTo(dst []byte, f form) ([]byte, error) {
	b := newObjBuilder(dst, f, m.Extra)
	b.obj("envelope", &m.Envelope)
	b.obj("message", &m.Message)
	return b.finish("")
}

func (e *Envelope) appendTo(dst []byte, f form) ([]byte, error) {
	b := newObjBuilder(dst, f, e.Extra)
	if f.canon {
		b.str("correlation_id", e.CorrelationID)
		b.str("message_id", e.MessageID)
		b.obj("recipient", &e.Recipient)
		b.obj("sender", &e.Sender)
		b.str("timestamp", e.Timestamp)
		b.int("ttl_seconds", e.TTLSeconds)
		b.str("version", e.Version)
	} else {
		b.str("version", e.Version)
		b.str("message_id", e.MessageID)
		b.str("correlation_id", e.CorrelationID)
		b.obj("sender", &e.Sender)
		b.obj("recipient", &e.Recipient)
		b.str("timestamp", e.Timestamp)
		b.int("ttl_seconds", e.TTLSeconds)
	}
	return b.finish("")
}

func (s *Sender) appendTo(dst []byte, f form) ([]byte, error) {
	b := newObjBuilder(dst, f, s.Extra)
	b.str("agent_id", s.AgentID)
	skip := ""
	if f.unsigned {
		// A null identity_sig is kept in Extra; it is still the signature member.
		skip = "identity_sig"
	} else {
		b.str("identity_sig", s.IdentitySig)
	}
	b.str("peer_id", s.PeerID)
	return b.finish(skip)
}

func (r *Recipient) appendTo(dst []byte, f form) ([]byte, error) {
	b := newObjBuilder(dst, f, r.Extra)
	b.str("agent_id", r.AgentID)
	b.str("channel", r.Channel)
	return b.finish("")
}

func (x *Body) appendTo(dst []byte, f form) ([]byte, error) {
	b := newObjBuilder(dst, f, x.Extra)
	if f.canon {
		b.str("intent", string(x.Intent))
		b.raw("payload", x.Payload)
		b.str("type", string(x.Type))
	} else {
		b.str("type", string(x.Type))
		b.str("intent", string(x.Intent))
		b.raw("payload", x.Payload)
	}
	return b.finish("")
}

// MarshalJSON encodes the document.
func (m Message) MarshalJSON() ([]byte, error) { return m.appendTo(nil, wireForm) }

// MarshalJSON encodes the envelope.
func (e Envelope) MarshalJSON() ([]byte, error) { return e.appendTo(nil, wireForm) }

// MarshalJSON encodes the sender.
func (s Sender) MarshalJSON() ([]byte, error) { return s.appendTo(nil, wireForm) }

// MarshalJSON encodes the recipient.
func (r Recipient) MarshalJSON() ([]byte, error) { return r.appendTo(nil, wireForm) }

// MarshalJSON encodes the message body.
func (b Body) MarshalJSON() ([]byte, error) { return b.appendTo(nil, wireForm) }

// UnmarshalJSON decodes the document, keeping unknown members in Extra.
func (m *Message) UnmarshalJSON(data []byte) error { return decodeWhole(data, m.decode) }

// UnmarshalJSON decodes the envelope, keeping unknown members in Extra.
func (e *Envelope) UnmarshalJSON(data []byte) error { return decodeWhole(data, e.decode) }

// UnmarshalJSON decodes the sender, keeping unknown members in Extra.
func (s *Sender) UnmarshalJSON(data []byte) error { return decodeWhole(data, s.decode) }

// UnmarshalJSON decodes the recipient, keeping unknown members in Extra.
func (r *Recipient) UnmarshalJSON(data []byte) error { return decodeWhole(data, r.decode) }

// UnmarshalJSON decodes the message body, keeping unknown members in Extra.
func (b *Body) UnmarshalJSON(data []byte) error { return decodeWhole(data, b.decode) }

func decodeWhole(data []byte, decode func(*scanner) error) error {
	s := scanner{data: data}
	if err := decode(&s); err != nil {
		return err
	}
	return s.end()
}

// pathError is a decoding error with the path of the member it concerns.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

func atPath(path string, err error) error {
	if err == nil {
		return nil
	}
	if pe := (*pathError)(nil); errors.As(err, &pe) {
		return err
	}
	return &pathError{path: path, err: err}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// memberResult is what a known-member decoder reports.
type memberResult uint8

const (
	unknownMember memberResult = iota // not a known name: keep it in Extra
	decodedMember                     // decoded into its field
	zeroMember                        // decoded, but empty or zero: keep it in Extra too
)

// decodeMembers decodes the object at path: known members through known, unknown ones and
// known ones holding null, an empty string or zero into *extra, verbatim (see objBuilder for
// why).
func decodeMembers(s *scanner, path string, extra *Extra, known func(name string) (memberResult, error)) error {
	*extra = nil
	err := s.object(func(name string) error {
		s.ws()
		start := s.i
		if !s.isNull() {
			res, err := known(name)
			if err != nil {
				return atPath(join(path, name), err)
			}
			switch res {
			case decodedMember:
				return nil
			case zeroMember:
				if *extra == nil {
					*extra = make(Extra)
				}
				(*extra)[strings.Clone(name)] = s.keep(s.data[start:s.i])
				return nil
			}
		}
		raw, err := s.skip()
		if err != nil {
			return atPath(join(path, name), err)
		}
		if *extra == nil {
			*extra = make(Extra)
		}
		(*extra)[strings.Clone(name)] = s.keep(raw)
		return nil
	})
	if path == "" {
		path = "document"
	}
	return atPath(path, err)
}

func strField(s *scanner, dst *string) (memberResult, error) {
	v, err := s.stringValue()
	*dst = v
	if v == "" {
		return zeroMember, err
	}
	return decodedMember, err
}

func (m *Message) decode(s *scanner) error {
	*m = Message{}
	return decodeMembers(s, "", &m.Extra, func(name string) (memberResult, error) {
		switch name {
		case "envelope":
			return decodedMember, m.Envelope.decodeAt(s, "envelope")
		case "message":
			return decodedMember, m.Message.decodeAt(s, "message")
		}
		return unknownMember, nil
	})
}

func (e *Envelope) decode(s *scanner) error { return e.decodeAt(s, "envelope") }

func (e *Envelope) decodeAt(s *scanner, path string) error {
	*e = Envelope{}
	return decodeMembers(s, path, &e.Extra, func(name string) (memberResult, error) {
		switch name {
		case "version":
			return strField(s, &e.Version)
		case "message_id":
			return strField(s, &e.MessageID)
		case "correlation_id":
			return strField(s, &e.CorrelationID)
		case "sender":
			return decodedMember, e.Sender.decodeAt(s, path+".sender")
		case "recipient":
			return decodedMember, e.Recipient.decodeAt(s, path+".recipient")
		case "timestamp":
			return strField(s, &e.Timestamp)
		case "ttl_seconds":
			v, err := s.int64Value()
			e.TTLSeconds = v
			if v == 0 {
				return zeroMember, err
			}
			return decodedMember, err
		}
		return unknownMember, nil
	})
}

func (x *Sender) decode(s *scanner) error { return x.decodeAt(s, "sender") }

func (x *Sender) decodeAt(s *scanner, path string) error {
	*x = Sender{}
	return decodeMembers(s, path, &x.Extra, func(name string) (memberResult, error) {
		switch name {
		case "agent_id":
			return strField(s, &x.AgentID)
		case "identity_sig":
			return strField(s, &x.IdentitySig)
		case "peer_id":
			return strField(s, &x.PeerID)
		}
		return unknownMember, nil
	})
}

func (r *Recipient) decode(s *scanner) error { return r.decodeAt(s, "recipient") }

func (r *Recipient) decodeAt(s *scanner, path string) error {
	*r = Recipient{}
	return decodeMembers(s, path, &r.Extra, func(name string) (memberResult, error) {
		switch name {
		case "agent_id":
			return strField(s, &r.AgentID)
		case "channel":
			return strField(s, &r.Channel)
		}
		return unknownMember, nil
	})
}

func (b *Body) decode(s *scanner) error { return b.decodeAt(s, "message") }

func (b *Body) decodeAt(s *scanner, path string) error {
	*b = Body{}
	return decodeMembers(s, path, &b.Extra, func(name string) (memberResult, error) {
		switch name {
		case "type":
			return strField(s, (*string)(&b.Type))
		case "intent":
			return strField(s, (*string)(&b.Intent))
		case "payload":
			raw, err := s.skip()
			b.Payload = s.keep(raw)
			return decodedMember, err
		}
		return unknownMember, nil
	})
}
