package protocol

import (
	"crypto/sha256"
	"hash"
	"slices"
	"sync"
)

// Digest hashes the canonical form while it is written instead of building it whole: a
// signed 16 MiB message would otherwise cost one more copy of itself, and the buffer's
// growth as much again, for bytes that are only hashed (BenchmarkDigest16MiB). The writer
// (wire.go's objBuilder, the scanner's canon for raw members) hands the sink what it has
// written whenever the bytes are final and pass spillAt; a long string goes to the hash
// straight from the document. Bytes are final when no object being written may still be
// reordered: Digest writes the objects near the top of a raw member (up to sortedDepth) in
// order from the start, reading their names first (canonObjectSorted); a deeper object is
// written in input order and sorted when it closes (canonObject), and nothing is spilled
// while one is open (scanner.unsettled), so that only such deep objects are held whole.

// spillAt is the size from which written canonical bytes go to the hash: 32 KiB (tests
// lower it, to cut documents at every place).
var spillAt = 32 << 10

// sortedDepth is how deep in a raw member Digest orders objects before writing them: each
// level reads its object twice (names first, then values), so a document nested deeper costs
// at most this many extra reads of itself, and its deeper objects are held whole while
// written.
const sortedDepth = 4

// digestSink is the SHA-256 that the canonical form streams into, with the scratch buffers of
// escaped strings written in pieces.
type digestSink struct {
	h        hash.Hash
	unesc    []byte
	out      []byte
	sumBytes [sha256.Size]byte
}

var sinkPool = sync.Pool{New: func() any { return &digestSink{h: sha256.New()} }}

// getSink returns a reset sink; give it back with putSink.
func getSink() *digestSink {
	s := sinkPool.Get().(*digestSink)
	s.h.Reset()
	return s
}

func putSink(s *digestSink) {
	if cap(s.unesc) > maxPooledBuffer || cap(s.out) > maxPooledBuffer {
		s.unesc, s.out = nil, nil
	}
	sinkPool.Put(s)
}

// spill hashes dst and returns it emptied, for the writer to go on with.
func (k *digestSink) spill(dst []byte) []byte {
	k.h.Write(dst)
	return dst[:0]
}

// sum hashes what is left in dst and returns the digest.
func (k *digestSink) sum(dst []byte) [sha256.Size]byte {
	k.h.Write(dst)
	k.h.Sum(k.sumBytes[:0])
	return k.sumBytes
}

// str writes a string whose body (between the quotes, as the document has it) is long: dst
// first, then the body in canonical form, read from the document as it is when it has no
// escape, else decoded and re-escaped in pieces of about spillAt bytes. It returns dst
// emptied, holding the closing quote.
func (k *digestSink) str(dst, body []byte, escaped bool) ([]byte, error) {
	k.h.Write(append(dst, '"'))
	if !escaped {
		k.h.Write(body)
		return append(dst[:0], '"'), nil
	}
	for len(body) > 0 {
		cut := escapedCut(body, spillAt)
		u, err := unescape(k.unesc[:0], body[:cut], true)
		if err != nil {
			return dst[:0], err
		}
		k.out = appendCanonBody(k.out[:0], u)
		k.h.Write(k.out)
		k.unesc = u[:0]
		body = body[cut:]
	}
	return append(dst[:0], '"'), nil
}

// escapedCut returns where a piece of at least n bytes of an escaped string body may end: on
// an escape's boundary, and never between the two escapes of a UTF-16 surrogate pair, so that
// each piece decodes as it would within the whole (len(body) when no such place follows n).
func escapedCut(body []byte, n int) int {
	high := false // the last escape was a high surrogate: its pair must follow in this piece
	for i := 0; i < len(body); {
		if i >= n && !high {
			return i
		}
		if body[i] != '\\' || i+1 >= len(body) {
			i, high = i+1, false
			continue
		}
		if body[i+1] != 'u' || i+6 > len(body) {
			i, high = i+2, false
			continue
		}
		r := hex4(body[i+2 : i+6])
		i, high = i+6, r >= 0xD800 && r < 0xDC00
	}
	return len(body)
}

// streaming reports whether what the scanner writes now is final and may go to the sink.
func (s *scanner) streaming() bool { return s.sink != nil && s.unsettled == 0 }

// maySpill hands dst to the sink when it is long and final.
func (s *scanner) maySpill(dst []byte) []byte {
	if s.streaming() && len(dst) >= spillAt {
		return s.sink.spill(dst)
	}
	return dst
}

// memberSpan is one member of an object canonObjectSorted writes: its name, unescaped,
// whether the document escaped it, and where its value starts and ends in the input.
type memberSpan struct {
	name       string
	escaped    bool
	start, end int
}

// canonObjectSorted writes the object at the cursor with its members in RFC 8785 order from
// the start: it reads the names first, stepping over (and so validating) the values, then
// canonicalises each value in the order of the names. What it writes is final, so the sink
// may take it as it goes (digest.go). Names are read and written as canonObject does.
func (s *scanner) canonObjectSorted(dst []byte) ([]byte, error) {
	s.i++ // '{'
	if s.depth++; s.depth > maxJSONDepth {
		return dst, s.errorf("nested too deeply")
	}
	defer func() { s.depth-- }()
	var stack [16]memberSpan
	spans, err := s.memberSpans(stack[:0])
	if err != nil {
		return dst, err
	}
	end := s.i
	slices.SortFunc(spans, func(a, b memberSpan) int { return compareUTF16(a.name, b.name) })
	dst = append(dst, '{')
	for i, sp := range spans {
		if i > 0 {
			if compareUTF16(spans[i-1].name, sp.name) == 0 {
				return dst, s.errorf("duplicate member %q", sp.name)
			}
			dst = append(dst, ',')
		}
		if sp.escaped {
			dst = appendCanonBytes(dst, []byte(sp.name))
		} else {
			dst = append(append(append(dst, '"'), sp.name...), '"')
		}
		dst = append(dst, ':')
		s.i = sp.start
		if dst, err = s.canon(dst); err != nil {
			return dst, err
		}
		dst = s.maySpill(dst)
	}
	s.i = end
	return append(dst, '}'), nil
}

// memberSpans reads the members of the object whose '{' the cursor has passed, appending
// each one's name and where its value lies to spans, and leaves the cursor after its '}'.
func (s *scanner) memberSpans(spans []memberSpan) ([]memberSpan, error) {
	if s.peek() == '}' {
		s.i++
		return spans, nil
	}
	for {
		body, escaped, err := s.rawString()
		if err != nil {
			return spans, err
		}
		name := unsafeString(body)
		if escaped {
			u, err := unescape(make([]byte, 0, len(body)), body, true)
			if err != nil {
				return spans, s.errorf("%v", err)
			}
			name = unsafeString(u)
		}
		if err := s.expect(':'); err != nil {
			return spans, err
		}
		s.ws()
		start := s.i
		if err := s.skipValue(); err != nil {
			return spans, err
		}
		spans = append(spans, memberSpan{name: name, escaped: escaped, start: start, end: s.i})
		switch s.peek() {
		case ',':
			s.i++
			if s.peek() != '"' {
				return spans, s.errorf("object member name must be a string")
			}
		case '}':
			s.i++
			return spans, nil
		default:
			return spans, s.errorf("object member not followed by ',' or '}'")
		}
	}
}
