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
