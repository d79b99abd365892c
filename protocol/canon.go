package protocol

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/gowebpki/jcs"
)

// This file writes RFC 8785 (JCS) canonical JSON directly. Its output is byte for byte what
// github.com/gowebpki/jcs.Transform produces from the encoded document (the tests and
// FuzzCanonical compare the two), at a fraction of the cost: the known structure is written
// in canonical form without a parse, and only raw members (payload and unknown fields) are
// parsed and re-serialised.

// unsafeString views b as a string without copying; b must not change while the string is in
// use (canonObject's names point into the input, which it never modifies).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 requires. Invalid UTF-8
// compares as U+FFFD, as Go's []rune conversion (and jcs) treat it.
func compareUTF16(a, b string) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			if ua, ub := firstUTF16(ra), firstUTF16(rb); ua != ub {
				return int(ua) - int(ub)
			}
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func firstUTF16(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}

// appendCanonString appends a Go string in RFC 8785 form: UTF-8 as is, except '"', '\\' and
// control characters, which are escaped (the short forms where JSON has them, else \u00xx).
// Invalid UTF-8 becomes U+FFFD, as encoding/json would write it.
func appendCanonString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	run := 0 // start of the pending run of bytes that need no change
	for i := 0; i < len(s); {
		if i += asciiRun(s[i:]); i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, s[run:i]...)
			dst = appendCanonByte(dst, c)
			i++
			run = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[run:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			run = i
			continue
		}
		i += size
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"')
}

// appendCanonBytes is appendCanonString for bytes that pass through unchanged (jcs does not
// repair invalid UTF-8 inside a raw value; DecodeJSON refuses such documents anyway).
func appendCanonBytes(dst, b []byte) []byte {
	return append(appendCanonBody(append(dst, '"'), b), '"')
}

// appendCanonBody is appendCanonBytes without the quotes.
func appendCanonBody(dst, b []byte) []byte {
	for _, c := range b {
		dst = appendCanonByte(dst, c)
	}
	return dst
}

func appendCanonByte(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if c < 0x20 {
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
	}
	return append(dst, c)
}

// appendCanonInt appends an integer as an ES6 number: exact below 2^53, rounded to the nearest
// double above, as RFC 8785 section 3.2.2.3 requires.
func appendCanonInt(dst []byte, v int64) []byte {
	const exact = 1 << 53
	if v > -exact && v < exact {
		return strconv.AppendInt(dst, v, 10)
	}
	s, _ := jcs.NumberToJSON(float64(v))
	return append(dst, s...)
}

// CanonicalJSON returns the RFC 8785 (JCS) canonical form of one JSON value: the bytes
// github.com/gowebpki/jcs.Transform produces (FuzzCanonical compares the two). It is stricter
// in what it accepts: a duplicate member name, a number literal that a double does not hold
// exactly (number.go), nesting deeper than 64 levels or anything that is not RFC 8259 JSON is
// refused. It is the one canonicaliser of the module: Canonical uses it for raw members, and
// discovery signs agent records with it.
func CanonicalJSON(raw []byte) ([]byte, error) {
	return appendCanonRaw(make([]byte, 0, len(raw)), raw)
}

// appendCanonRaw appends one JSON value in RFC 8785 form.
func appendCanonRaw(dst, raw []byte) ([]byte, error) { return appendCanonRawTo(dst, raw, nil) }

// appendCanonRawTo is appendCanonRaw streaming into sink (when not nil) what is final
// (digest.go): the dst it returns holds only what was not spilled.
func appendCanonRawTo(dst, raw []byte, sink *digestSink) ([]byte, error) {
	s := scanner{data: raw, sink: sink}
	dst, err := s.canon(dst)
	if err != nil {
		return dst, err
	}
	return dst, s.end()
}

func (s *scanner) canon(dst []byte) ([]byte, error) {
	switch c := s.peek(); {
	case c == '{' && s.streaming() && s.depth < sortedDepth:
		return s.canonObjectSorted(dst)
	case c == '{':
		return s.canonObject(dst)
	case c == '[':
		s.i++
		if s.depth++; s.depth > maxJSONDepth {
			return dst, s.errorf("nested too deeply")
		}
		defer func() { s.depth-- }()
		dst = append(dst, '[')
		if s.peek() == ']' {
			s.i++
			return append(dst, ']'), nil
		}
		for {
			var err error
			if dst, err = s.canon(dst); err != nil {
				return dst, err
			}
			dst = s.maySpill(dst)
			switch s.peek() {
			case ',':
				s.i++
				dst = append(dst, ',')
			case ']':
				s.i++
				return append(dst, ']'), nil
			default:
				return dst, s.errorf("array element not followed by ',' or ']'")
			}
		}
	case c == '"':
		return s.canonString(dst)
	case c == '-' || c >= '0' && c <= '9':
		lit, err := s.number()
		if err != nil {
			return dst, err
		}
		return appendCanonNumber(dst, lit)
	case c == 't':
		return append(dst, "true"...), s.literal("true")
	case c == 'f':
		return append(dst, "false"...), s.literal("false")
	case c == 'n':
		return append(dst, "null"...), s.literal("null")
	case c == 0 && s.i >= len(s.data):
		return dst, s.errorf("unexpected end of JSON")
	default:
		return dst, s.errorf("invalid character %q looking for a value", c)
	}
}

// canonString writes the string at the cursor in RFC 8785 form; a long one goes to the
// digest sink, when there is one, in pieces (digest.go).
func (s *scanner) canonString(dst []byte) ([]byte, error) {
	body, escaped, err := s.rawString()
	if err != nil {
		return dst, err
	}
	if s.streaming() && len(body) >= spillAt {
		if dst, err = s.sink.str(dst, body, escaped); err != nil {
			return dst, s.errorf("%v", err)
		}
		return dst, nil
	}
	if !escaped {
		// No escapes and no control characters: already canonical.
		dst = append(dst, '"')
		dst = append(dst, body...)
		return append(dst, '"'), nil
	}
	u, err := unescape(make([]byte, 0, len(body)), body, true)
	if err != nil {
		return dst, s.errorf("%v", err)
	}
	return appendCanonBytes(dst, u), nil
}

// canonSpan is one member of a raw object as canonObject wrote it: its name, unescaped, and
// where `"name":value` starts and ends in the output.
type canonSpan struct {
	name       string
	start, end int
}

// canonObject writes the object at the cursor straight into dst in input order, and reorders
// it afterwards only if its names were not already in RFC 8785 order, so that the common
// sorted object is written without any copy.
func (s *scanner) canonObject(dst []byte) ([]byte, error) {
	s.i++ // '{'
	if s.depth++; s.depth > maxJSONDepth {
		return dst, s.errorf("nested too deeply")
	}
	s.unsettled++ // its members may still move: nothing is spilled until it closes
	defer func() { s.depth--; s.unsettled-- }()
	base := len(dst)
	dst = append(dst, '{')
	if s.peek() == '}' {
		s.i++
		return append(dst, '}'), nil
	}
	var stack [16]canonSpan
	spans := stack[:0]
	sorted := true
	for {
		body, escaped, err := s.rawString()
		if err != nil {
			return dst, err
		}
		start := len(dst)
		var name string
		if escaped {
			u, err := unescape(make([]byte, 0, len(body)), body, true)
			if err != nil {
				return dst, s.errorf("%v", err)
			}
			name = string(u)
			dst = appendCanonBytes(dst, u)
		} else {
			name = unsafeString(body)
			dst = append(dst, '"')
			dst = append(dst, body...)
			dst = append(dst, '"')
		}
		if n := len(spans); n > 0 {
			switch c := compareUTF16(spans[n-1].name, name); {
			case c == 0:
				return dst, s.errorf("duplicate member %q", name)
			case c > 0:
				sorted = false
			}
		}
		if err := s.expect(':'); err != nil {
			return dst, err
		}
		dst = append(dst, ':')
		if dst, err = s.canon(dst); err != nil {
			return dst, err
		}
		spans = append(spans, canonSpan{name: name, start: start, end: len(dst)})
		switch s.peek() {
		case ',':
			s.i++
			if s.peek() != '"' {
				return dst, s.errorf("object member name must be a string")
			}
			dst = append(dst, ',')
			continue
		case '}':
			s.i++
		default:
			return dst, s.errorf("object member not followed by ',' or '}'")
		}
		break
	}
	if sorted {
		return append(dst, '}'), nil
	}
	return s.sortMembers(dst, base, spans)
}

// sortMembers rewrites the object canonObject wrote from base on with its members in the
// order of their names (UTF-16 code units), refusing a duplicate name.
func (s *scanner) sortMembers(dst []byte, base int, spans []canonSpan) ([]byte, error) {
	slices.SortFunc(spans, func(a, b canonSpan) int { return compareUTF16(a.name, b.name) })
	for i := 1; i < len(spans); i++ {
		if compareUTF16(spans[i-1].name, spans[i].name) == 0 {
			return dst, s.errorf("duplicate member %q", spans[i].name)
		}
	}
	// Write the sorted object after the unsorted one, then move it into place.
	end := len(dst)
	dst = append(dst, '{')
	for i, sp := range spans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, dst[sp.start:sp.end]...)
	}
	dst = append(dst, '}')
	n := copy(dst[base:], dst[end:])
	return dst[:base+n], nil
}

// appendCanonNumber writes a number literal as RFC 8785 does: parsed as an IEEE 754 double
// and printed the way ECMAScript prints it. A literal that does not denote exactly the
// printed number is refused (number.go).
func appendCanonNumber(dst, lit []byte) ([]byte, error) {
	if isSmallInt(lit) {
		if string(lit) == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return dst, fmt.Errorf("number %s: %w", lit, err)
	}
	n, err := jcs.NumberToJSON(f)
	if err != nil {
		return dst, errors.New("number " + clipBytes(lit) + " is not finite")
	}
	if err := checkNumberLiteral(lit, f); err != nil {
		return dst, err
	}
	return append(dst, n...), nil
}

// isSmallInt reports whether lit is an integer literal of at most 15 digits, which a double
// holds exactly and ECMAScript prints as is.
func isSmallInt(lit []byte) bool {
	d := lit
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
