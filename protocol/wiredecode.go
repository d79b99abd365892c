package protocol

import (
	"errors"
	"strings"
)

// The decoding side of the wire format: each part of a message reads its known members,
// keeps the others (Extra), and names the path of what it refuses.

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
