package protocol

import (
	"math/rand/v2"
	"testing"
)

// naiveRun is plainRun and asciiRun one byte at a time, as the scanner read strings before.
func naiveRun(s []byte, ascii bool) int {
	i := 0
	for i < len(s) && plainStringByte[s[i]] && (!ascii || s[i] < 0x80) {
		i++
	}
	return i
}

// The word-at-a-time runs stop exactly where the byte-at-a-time loop stops, for every byte
// value at every position of a word.
func TestPlainRun_StopsWhereTheBytewiseLoopStops(t *testing.T) {
	for stop := 0; stop < 256; stop++ {
		for at := 0; at < 20; at++ {
			s := make([]byte, 24)
			for i := range s {
				s[i] = 'a' + byte(i%26)
			}
			s[at] = byte(stop)
			for _, ascii := range []bool{false, true} {
				want, got := naiveRun(s, ascii), plainRun(s)
				if ascii {
					got = asciiRun(string(s))
				}
				if got != want {
					t.Fatalf("byte %#02x at %d (ascii only %v): run %d, want %d", stop, at, ascii, got, want)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := make([]byte, r.IntN(40))
		for i := range s {
			switch r.IntN(4) {
			case 0:
				s[i] = byte(r.IntN(256))
			default:
				s[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		if got, want := plainRun(s), naiveRun(s, false); got != want {
			t.Fatalf("plainRun(%q) = %d, want %d", s, got, want)
		}
		if got, want := asciiRun(string(s)), naiveRun(s, true); got != want {
			t.Fatalf("asciiRun(%q) = %d, want %d", s, got, want)
		}
	}
}

// naiveNesting is nesting one byte at a time, as it read payloads before plainRun.
func naiveNesting(raw []byte) (depth int, isObject bool) {
	inString, escaped := false, false
	cur := 0
	first := true
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			inString = true
		case '{', '[':
			cur++
			depth = max(depth, cur)
		case '}', ']':
			cur--
		}
		if first {
			isObject = c == '{'
			first = false
		}
	}
	return depth, isObject
}

// nesting skips a string's plain runs a word at a time and still finds what the byte loop
// finds, for inputs made mostly of the bytes that matter to it (quotes, escapes, brackets,
// control characters) between runs of text, valid JSON or not.
func TestNesting_FindsWhatTheBytewiseLoopFinds(t *testing.T) {
	alphabet := []byte(`{}[]"\ ,:ab` + "\x01\n\xc3\xa9")
	r := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		s := make([]byte, r.IntN(64))
		for i := range s {
			if r.IntN(3) == 0 {
				s[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				s[i] = 'a' + byte(r.IntN(26))
			}
		}
		d, o := nesting(s)
		wd, wo := naiveNesting(s)
		if d != wd || o != wo {
			t.Fatalf("nesting(%q) = %d, %v; the byte loop says %d, %v", s, d, o, wd, wo)
		}
	}
}

func FuzzNesting(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b\"{{"}`, `{"a":["\\",{"b":{}}]}`, `"{"`, `[{"x":"` + "\x00" + `{"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		d, o := nesting(s)
		if wd, wo := naiveNesting(s); d != wd || o != wo {
			t.Fatalf("nesting(%q) = %d, %v; the byte loop says %d, %v", s, d, o, wd, wo)
		}
	})
}
