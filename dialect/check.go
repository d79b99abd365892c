package dialect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// checker validates the members of one object of a dialect's document; field names in its
// errors are dotted paths from the document's root (metadata.priority), or JSON pointers
// (/payload/error/code) when pointer is set.
type checker struct {
	d      Dialect
	prefix string
	m      Members
	// pointer names fields as JSON pointers, as A2ACP's schema errors do; its root checker's
	// prefix is "/".
	pointer bool
}

func (c checker) path(k string) string { return c.prefix + k }

// sep separates a member's name from its parent's.
func (c checker) sep() string {
	if c.pointer {
		return "/"
	}
	return "."
}

// inner is the prefix of the members of member k.
func (c checker) inner(k string) string { return c.path(k) + c.sep() }

// elem names element i of the array member k.
func (c checker) elem(k string, i int) string {
	if c.pointer {
		return fmt.Sprintf("%s/%d", c.path(k), i)
	}
	return fmt.Sprintf("%s[%d]", c.path(k), i)
}

// text returns member k's string value, unescaped (a view of the document when it holds no
// escape, to read and not keep); required says whether it must be present and not blank.
func (c checker) text(k string, required bool) ([]byte, error) {
	raw, ok := c.m[k]
	return c.textOf(k, raw, ok, required)
}

// textOf is text of member k, given its value raw and whether it is present.
func (c checker) textOf(k string, raw []byte, ok, required bool) ([]byte, error) {
	if !ok {
		if required {
			return nil, invalid(c.d, c.path(k), "is required")
		}
		return nil, nil
	}
	b, ok := unquoteBytes(raw)
	if !ok {
		return nil, invalid(c.d, c.path(k), "must be a string")
	}
	if required && len(bytes.TrimSpace(b)) == 0 {
		return nil, invalid(c.d, c.path(k), "must not be empty")
	}
	return b, nil
}

// str returns member k as a string, as text checks it.
func (c checker) str(k string, required bool) (string, error) {
	b, err := c.text(k, required)
	return string(b), err
}

// oneOf checks that member k, when present (or always, when required), is one of the values,
// and returns it.
func (c checker) oneOf(k string, required bool, values ...string) (string, error) {
	b, err := c.text(k, required)
	if _, present := c.m[k]; err != nil || !present {
		return "", err
	}
	for _, v := range values {
		if string(b) == v {
			return v, nil
		}
	}
	return "", invalid(c.d, c.path(k), "%q is not one of %s", clip(string(b)), strings.Join(values, ", "))
}

// object returns member k as an object checker.
func (c checker) object(k string, required bool) (checker, bool, error) {
	raw, ok := c.m[k]
	if !ok {
		if required {
			return checker{}, false, invalid(c.d, c.path(k), "is required (a JSON object)")
		}
		return checker{}, false, nil
	}
	m := payloadOf(raw)
	if m == nil {
		return checker{}, false, invalid(c.d, c.path(k), "must be a JSON object")
	}
	return checker{d: c.d, prefix: c.inner(k), m: m, pointer: c.pointer}, true, nil
}

// agent checks that member k is an object whose agent_id is an agent id: object(k, true) and
// agentID("agent_id") in one, reading that member only (field), without a map.
func (c checker) agent(k string) error {
	raw, ok := c.m[k]
	if !ok {
		return invalid(c.d, c.path(k), "is required (a JSON object)")
	}
	v, found, isObject := field(raw, "agent_id")
	if !isObject {
		return invalid(c.d, c.path(k), "must be a JSON object")
	}
	if (checker{d: c.d}).agentIDOf("agent_id", v, found) == nil {
		return nil // no error to name the member in: its path is not written
	}
	return checker{d: c.d, prefix: c.inner(k), pointer: c.pointer}.agentIDOf("agent_id", v, found)
}

// present checks that member k is there, whatever its value.
func (c checker) present(k string) error {
	if _, ok := c.m[k]; !ok {
		return invalid(c.d, c.path(k), "is required")
	}
	return nil
}

// uuid checks that member k is an RFC 9562 UUID (any version).
func (c checker) uuid(k string) error {
	b, err := c.text(k, true)
	if err != nil {
		return err
	}
	if _, perr := uuid.ParseBytes(b); perr != nil || len(b) != 36 {
		return invalid(c.d, c.path(k), "%q is not a UUID (8-4-4-4-12 hex digits)", clip(string(b)))
	}
	return nil
}

// isUUID reports whether s is an RFC 9562 UUID (any version) in its 36-character form.
func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// maxIDLen bounds an id that becomes an IACP correlation_id (IACP's limit).
const maxIDLen = 128

// id checks that member k, when present (or always, when required), is a non-empty string of
// at most maxIDLen characters.
func (c checker) id(k string, required bool) error {
	b, err := c.text(k, required)
	if err != nil {
		return err
	}
	if _, present := c.m[k]; present && (len(bytes.TrimSpace(b)) == 0 || len(b) > maxIDLen) {
		return invalid(c.d, c.path(k), "must be a non-empty string of at most %d bytes", maxIDLen)
	}
	return nil
}

// array returns member k's elements, verbatim; required says whether it must be present.
func (c checker) array(k string, required bool) ([]json.RawMessage, error) {
	raw, ok := c.m[k]
	if !ok {
		if required {
			return nil, invalid(c.d, c.path(k), "is required (a JSON array)")
		}
		return nil, nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil || a == nil {
		return nil, invalid(c.d, c.path(k), "must be a JSON array")
	}
	return a, nil
}

// strs checks that member k, when present (or always, when required), is an array of at most
// limit non-empty strings.
func (c checker) strs(k string, required bool, limit int) ([]string, error) {
	a, err := c.array(k, required)
	if err != nil || a == nil {
		return nil, err
	}
	if len(a) > limit {
		return nil, invalid(c.d, c.path(k), "has %d entries; at most %d are allowed", len(a), limit)
	}
	out := make([]string, len(a))
	for i, e := range a {
		if json.Unmarshal(e, &out[i]) != nil || strings.TrimSpace(out[i]) == "" {
			return nil, invalid(c.d, c.elem(k, i), "must be a non-empty string")
		}
	}
	return out, nil
}

// objects checks that member k, when present, is an array of objects and returns a checker
// for each.
func (c checker) objects(k string) ([]checker, error) {
	a, err := c.array(k, false)
	if err != nil {
		return nil, err
	}
	out := make([]checker, len(a))
	for i, e := range a {
		m := payloadOf(e)
		if m == nil {
			return nil, invalid(c.d, c.elem(k, i), "must be a JSON object")
		}
		out[i] = checker{d: c.d, prefix: c.elem(k, i) + c.sep(), m: m, pointer: c.pointer}
	}
	return out, nil
}

// time checks that member k is an RFC 3339 timestamp (ISO 8601 with a zone).
func (c checker) time(k string, required bool) (time.Time, error) {
	s, err := c.str(k, required)
	if err != nil || s == "" && !required {
		return time.Time{}, err
	}
	if _, present := c.m[k]; !present {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalid(c.d, c.path(k), "%q is not an RFC 3339 timestamp such as 2025-09-21T10:30:00Z", clip(s))
	}
	return t, nil
}

// number checks that member k, when present, is a number within [lo, hi].
func (c checker) number(k string, lo, hi float64) (float64, bool, error) {
	raw, ok := c.m[k]
	if !ok {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || f < lo || f > hi {
		return 0, false, invalid(c.d, c.path(k), "must be a number from %s to %s", decimal(lo), decimal(hi))
	}
	return f, true, nil
}

// decimal writes a bound as people do: 2147483647, not 2.147483647e+09 (but 1.8e+308).
func decimal(f float64) string {
	if math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', 2, 64)
}

// boolean checks that member k, when present, is true or false.
func (c checker) boolean(k string) (bool, error) {
	raw, ok := c.m[k]
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, invalid(c.d, c.path(k), "must be true or false")
	}
	return b, nil
}

// agentID checks an agent id: a non-empty string of at most 64 characters (IaCP 1.0 section
// 10.1's limit, which the ElizaOS draft does not contradict).
func (c checker) agentID(k string) error {
	raw, ok := c.m[k]
	return c.agentIDOf(k, raw, ok)
}

// agentIDOf is agentID of member k, given its value raw and whether it is present.
func (c checker) agentIDOf(k string, raw []byte, ok bool) error {
	b, err := c.textOf(k, raw, ok, true)
	if err != nil {
		return err
	}
	if n := utf8.RuneCount(b); n > 64 {
		return invalid(c.d, c.path(k), "is %d characters; at most 64 are allowed", n)
	}
	return nil
}

// clip shortens a quoted value in an error message.
func clip(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "..."
	}
	return s
}
