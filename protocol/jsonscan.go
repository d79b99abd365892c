package protocol

import (
	"bytes"
	"fmt"
	"strconv"
)

// maxJSONDepth bounds the nesting of a whole document (the payload sits at level 3), so that
// a hostile document can neither exhaust the stack nor make canonicalisation, which may move
// each unsorted object once per level above it, cost more than 64 copies of the document.
// Validate applies the much smaller payload limit (DefaultMaxNesting).
const maxJSONDepth = 64

// scanner is a strict, allocation-light JSON reader (RFC 8259) over one buffer. It is what the
// codecs and the canonicaliser share: it validates every value it skips, unescapes strings the
// way encoding/json does, and reports errors with their byte offset.
type scanner struct {
	data  []byte
	i     int
	depth int
	// spaced records that white space was skipped, so that appendCompact can copy a value
	// that has none in one move.
	spaced bool
	// shared makes keep return views of data instead of copies (DecodeJSONShared).
	shared bool
	// sink, when set, takes the canonical form as it is written (Digest, digest.go);
	// unsettled counts the objects being written whose members may still be reordered, while
	// which nothing is spilled.
	sink      *digestSink
	unsettled int
}

// keep returns raw bytes of a value for a decoded message to hold: a copy, or with shared a
// view of the input whose capacity ends with it, so that an append never writes into data.
func (s *scanner) keep(b []byte) []byte {
	if s.shared {
		return b[:len(b):len(b)]
	}
	return bytes.Clone(b)
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
			s.spaced = true
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the end (a NUL byte in
// the input also reads as 0, which no caller takes for the end: they compare with s.i).
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.i >= len(s.data) {
			return s.errorf("unexpected end of JSON, want %q", c)
		}
		return s.errorf("invalid character %q, want %q", s.data[s.i], c)
	}
	s.i++
	return nil
}

// end checks that only white space follows.
func (s *scanner) end() error {
	if s.ws(); s.i < len(s.data) {
		return s.errorf("invalid character %q after the top-level value", s.data[s.i])
	}
	return nil
}

// object calls member for each member of the object at the cursor, with the unescaped name;
// member must consume the value. The name may point into the input: member must copy it to
// keep it. It refuses duplicate names, at every level: a document whose
// meaning depends on which duplicate a parser keeps cannot be signed unambiguously (I-JSON,
// RFC 7493 section 2.3; RFC 8785 section 3.1).
func (s *scanner) object(member func(name string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.depth++; s.depth > maxJSONDepth {
		return s.errorf("nested too deeply")
	}
	defer func() { s.depth-- }()
	var stack [16]string
	seen := stack[:0]
	var seenMap map[string]struct{} // past 16 members
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errorf("object member name must be a string")
		}
		name, err := s.name()
		if err != nil {
			return err
		}
		if seenMap != nil {
			if _, dup := seenMap[name]; dup {
				return s.errorf("duplicate member %q", name)
			}
			seenMap[name] = struct{}{}
		} else {
			for _, n := range seen {
				if n == name {
					return s.errorf("duplicate member %q", name)
				}
			}
			if seen = append(seen, name); len(seen) == cap(stack) {
				seenMap = make(map[string]struct{}, 2*len(seen))
				for _, n := range seen {
					seenMap[n] = struct{}{}
				}
			}
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		s.ws()
		if err := member(name); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("object member not followed by ',' or '}'")
		}
	}
}

// skip validates and consumes one value, returning its bytes (white space inside included).
func (s *scanner) skip() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skipValue(); err != nil {
		return nil, err
	}
	return s.data[start:s.i], nil
}

func (s *scanner) skipValue() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func(string) error { return s.skipValue() })
	case c == '[':
		s.i++
		if s.depth++; s.depth > maxJSONDepth {
			return s.errorf("nested too deeply")
		}
		defer func() { s.depth-- }()
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skipValue(); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return s.errorf("array element not followed by ',' or ']'")
			}
		}
	case c == '"':
		return s.skipString()
	case c == '-' || c >= '0' && c <= '9':
		lit, err := s.number()
		if err == nil && !isSmallInt(lit) {
			f, perr := strconv.ParseFloat(string(lit), 64)
			if perr != nil {
				return s.errorf("number %s is not a finite IEEE 754 double (I-JSON)", clipBytes(lit))
			}
			if err := checkNumberLiteral(lit, f); err != nil {
				return s.errorf("%v", err)
			}
		}
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == 0 && s.i >= len(s.data):
		return s.errorf("unexpected end of JSON")
	default:
		return s.errorf("invalid character %q looking for a value", c)
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.i < len(lit) || string(s.data[s.i:s.i+len(lit)]) != lit {
		return s.errorf("invalid literal, want %s", lit)
	}
	s.i += len(lit)
	return nil
}

// isNull reports whether the value at the cursor is the literal null.
func (s *scanner) isNull() bool {
	s.ws()
	return len(s.data)-s.i >= 4 && string(s.data[s.i:s.i+4]) == "null"
}

// number consumes a number literal (RFC 8259 grammar) and returns it.
func (s *scanner) number() ([]byte, error) {
	start := s.i
	d := s.data
	i := s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		s.i = i
		return nil, s.errorf("invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.i = i
			return nil, s.errorf("invalid number: digits must follow '.'")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.i = i
			return nil, s.errorf("invalid number: digits must follow the exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	s.i = i
	return d[start:i], nil
}

// plainStringByte tells the bytes a string literal holds as they are: all but '"', '\\' and
// the control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// maxExactInt is 2^53: every integer up to it is exactly an IEEE 754 double.
const maxExactInt = 1 << 53

// int64Value consumes a number that must be an integer literal within int64, as encoding/json
// requires when it decodes into an int64.
func (s *scanner) int64Value() (int64, error) {
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, s.errorf("want a number")
	}
	lit, err := s.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer within int64", clipBytes(lit))
	}
	if v > maxExactInt || v < -maxExactInt {
		return 0, fmt.Errorf("%s is beyond 2^53: not exactly representable as an IEEE 754 double, so RFC 8785 could not sign it faithfully", lit)
	}
	return v, nil
}

// AppendCompactJSON appends raw, which must be one JSON value, to dst without insignificant
// white space, and fails if it is not valid JSON (RFC 8259). A value without white space
// outside its strings is appended as it is, after one scan. It is how a document's raw
// members are written, exported for the node's other writers of JSON (the audit log).
func AppendCompactJSON(dst, raw []byte) ([]byte, error) { return appendCompact(dst, raw) }

// IsCompactJSON reports whether raw is one valid JSON value without insignificant white space:
// what AppendCompactJSON would append as it is. A writer can then send raw on as it is,
// rather than copy it.
func IsCompactJSON(raw []byte) bool {
	s := scanner{data: raw}
	if _, err := s.skip(); err != nil || s.end() != nil {
		return false
	}
	return !s.spaced
}

// AppendJSONString appends s as a JSON string in its RFC 8785 form: UTF-8 as it is; the
// quotation mark, the backslash and control characters escaped; invalid UTF-8 replaced by
// U+FFFD.
func AppendJSONString(dst []byte, s string) []byte { return appendCanonString(dst, s) }

// appendCompact appends raw (one JSON value) to dst without insignificant white space,
// validating it on the way.
func appendCompact(dst, raw []byte) ([]byte, error) {
	s := scanner{data: raw}
	if _, err := s.skip(); err != nil {
		return dst, err
	}
	if err := s.end(); err != nil {
		return dst, err
	}
	return appendValid(dst, raw, s.spaced), nil
}

// appendValid appends raw, one JSON value a scanner has read whole, without insignificant
// white space; spaced is the scanner's: whether it skipped any (if not, raw is copied as is).
func appendValid(dst, raw []byte, spaced bool) []byte {
	if !spaced {
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case ' ', '\t', '\r', '\n':
		case '"':
			end := min(stringEnd(raw, i+1), len(raw)-1) // raw is valid: the string is closed
			dst = append(dst, raw[i:end+1]...)
			i = end
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
