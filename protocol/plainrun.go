package protocol

// Finding where a string literal needs attention, eight bytes at a time: the scanner and the
// canonical writer spend most of their time walking the runs of ordinary characters in
// strings (a payload's text, a signature, ids), one table lookup or comparison per byte.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special sets the high bit of each byte of w that a string literal cannot hold as it is:
// '"', '\\' and the control characters below 0x20 (and possibly of bytes above such a byte,
// so only whether it is zero is exact: zero means w has none).
func special(w uint64) uint64 {
	q, b := w^(ones*'"'), w^(ones*'\\')
	return ((w-ones*0x20)&^w | (q-ones)&^q | (b-ones)&^b) & highs
}

// load64 reads the eight bytes of s at i, little-endian (one load once compiled).
func load64[T string | []byte](s T, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// plainRun is the length of the longest prefix of s whose bytes a string literal holds as
// they are (plainStringByte: all but '"', '\\' and the control characters).
func plainRun[T string | []byte](s T) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if special(load64(s, i)) != 0 {
			break
		}
	}
	for i < len(s) && plainStringByte[s[i]] {
		i++
	}
	return i
}

// asciiRun is plainRun for bytes below 0x80 only: the run that RFC 8785 writes as it is
// without decoding UTF-8.
func asciiRun[T string | []byte](s T) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if w := load64(s, i); special(w)|w&highs != 0 {
			break
		}
	}
	for i < len(s) && s[i] < 0x80 && plainStringByte[s[i]] {
		i++
	}
	return i
}

// stringEnd returns the index of the quotation mark that closes the string literal whose
// contents begin at raw[i] (just after its opening quotation mark), or len(raw) when nothing
// closes it. Escapes are stepped over, and runs of ordinary characters skipped eight bytes at
// a time (plainRun). It checks nothing: its callers scan raw for its structure alone.
func stringEnd(raw []byte, i int) int {
	for i < len(raw) {
		i += plainRun(raw[i:])
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case '"':
			return i
		case '\\':
			i += 2
		default: // a control character, which a string holds here as any other byte
			i++
		}
	}
	return len(raw)
}
