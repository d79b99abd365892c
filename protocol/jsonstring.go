package protocol

// The string half of the scanner (jsonscan.go): literals, escapes and names.

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// skipString validates and consumes a string literal. Escapes must not leave a lone UTF-16
// surrogate (I-JSON, RFC 7493 section 2.1), so that every value can be canonicalised.
func (s *scanner) skipString() error {
	body, escaped, err := s.rawString()
	if err == nil && escaped {
		if uerr := checkSurrogates(body); uerr != nil {
			return s.errorf("%v", uerr)
		}
	}
	return err
}

// errLoneSurrogate is unescape's refusal under jcsRules.
var errLoneSurrogate = errors.New("lone UTF-16 surrogate in a string escape")

// checkSurrogates is unescape(nil, body, true)'s verdict without its copy: every surrogate
// escape of a validated string body is the high half of a pair whose low half follows.
func checkSurrogates(body []byte) error {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if body[i+1] != 'u' {
			i++
			continue
		}
		r := rune(hex4(body[i+2 : i+6]))
		i += 5
		if !utf16.IsSurrogate(r) {
			continue
		}
		if i+7 > len(body) || body[i+1] != '\\' || body[i+2] != 'u' ||
			utf16.DecodeRune(r, rune(hex4(body[i+3:i+7]))) == utf8.RuneError {
			return errLoneSurrogate
		}
		i += 6
	}
	return nil
}

// rawString consumes a string literal and returns its body (between the quotes, escapes
// intact) and whether it holds any escape.
func (s *scanner) rawString() (body []byte, escaped bool, err error) {
	if s.peek() != '"' {
		return nil, false, s.errorf("want a string")
	}
	d := s.data
	i := s.i + 1
	start := i
	for i < len(d) {
		i += plainRun(d[i:])
		if i >= len(d) {
			break
		}
		c := d[i]
		switch {
		case c == '"':
			s.i = i + 1
			return d[start:i], escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				s.i = i
				return nil, false, s.errorf("unterminated string")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex4(d[i+2:i+6]) {
					s.i = i
					return nil, false, s.errorf("invalid \\u escape")
				}
				i += 6
			default:
				s.i = i
				return nil, false, s.errorf("invalid escape \\%c", d[i+1])
			}
		case c < 0x20:
			s.i = i
			return nil, false, s.errorf("control character %#02x in string", c)
		default:
			i++
		}
	}
	s.i = i
	return nil, false, s.errorf("unterminated string")
}

// str consumes a string literal and returns it unescaped, as encoding/json would. A lone
// surrogate escape is refused (I-JSON); invalid UTF-8 is replaced by U+FFFD.
func (s *scanner) str() (string, error) {
	body, escaped, err := s.rawString()
	if err != nil {
		return "", err
	}
	if !escaped && utf8.Valid(body) {
		return string(body), nil
	}
	if escaped {
		if err := checkSurrogates(body); err != nil {
			return "", s.errorf("%v", err)
		}
	}
	b, _ := unescape(make([]byte, 0, len(body)), body, false)
	return string(b), nil
}

// name is str for a member name that is used only while its object is being read: without
// escapes it points into the input instead of being copied.
func (s *scanner) name() (string, error) {
	body, escaped, err := s.rawString()
	if err != nil {
		return "", err
	}
	if !escaped && utf8.Valid(body) {
		return unsafeString(body), nil
	}
	s.i -= len(body) + 2
	return s.str()
}

// unescape appends the decoded body of a validated string literal to dst. With jcsRules it
// is strict, as I-JSON requires: a surrogate escape that is not half of a valid pair is an
// error (jcs.Transform would swallow the next escape, encoding/json would not: refusing is
// the only reading both agree on), and raw bytes pass through as jcs passes them. Without
// it, it follows encoding/json (a broken surrogate becomes U+FFFD) and never fails.
func unescape(dst, body []byte, jcsRules bool) ([]byte, error) {
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			if jcsRules || c < utf8.RuneSelf {
				dst = append(dst, c)
				i++
				continue
			}
			r, size := utf8.DecodeRune(body[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
			continue
		}
		switch body[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(body[i+2 : i+6]))
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
					r2 := rune(hex4(body[i+2 : i+6]))
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						i += 6
						continue
					}
				}
				if jcsRules {
					return dst, errLoneSurrogate
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, body[i+1])
		}
		i += 2
	}
	return dst, nil
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) uint16 {
	var v uint16
	for _, c := range b {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c - 'a' + 10)
		default:
			v |= uint16(c - 'A' + 10)
		}
	}
	return v
}

// stringValue consumes a value that must be a string.
func (s *scanner) stringValue() (string, error) {
	if s.peek() != '"' {
		return "", errors.New("want a string")
	}
	return s.str()
}
