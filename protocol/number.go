package protocol

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/gowebpki/jcs"
)

// This file holds the rule that every number literal in a document denotes exactly the number
// its RFC 8785 canonical form denotes.
//
// RFC 8785 signs a number as the IEEE 754 double nearest to its literal, printed the shortest
// way. Two literals that round to one double therefore share one signature: a relay could
// rewrite 9007199254740993 as 9007199254740992 (or 9.007199254740992e15) and the signature
// would still verify, while a receiver that parses numbers exactly (Python's int, a BigDecimal)
// would read another number than the sender wrote. So a literal must be the number its
// canonical form prints: 1.50, 1e21 and -12.5e2 pass (they are 1.5, 1e+21 and -1250 exactly),
// 9007199254740993, 123456789012345678901 and 0.1000000000000000055511151231257827 do not.
// Such numbers must travel as strings.

// checkNumberLiteral returns an error when lit (a valid RFC 8259 number) is not the number
// that the double nearest to it prints as. f is that double. Literals of at most 15 digits
// are exact and never reach here (isSmallInt).
func checkNumberLiteral(lit []byte, f float64) error {
	short := strconv.AppendFloat(make([]byte, 0, 32), f, 'g', -1, 64)
	if sameDecimal(lit, short) {
		return nil
	}
	canon, _ := jcs.NumberToJSON(f)
	return fmt.Errorf("number %s is not exactly representable as an IEEE 754 double: a relay could rewrite it as %s "+
		"without breaking the signature (RFC 8785 signs the double); send it as a string", clipBytes(lit), canon)
}

// sameDecimal reports whether two number literals denote the same decimal value.
func sameDecimal(a, b []byte) bool {
	na, da, ea, oka := decimalOf(a)
	nb, db, eb, okb := decimalOf(b)
	if !oka || !okb {
		return false
	}
	if len(da) == 0 || len(db) == 0 {
		return len(da) == len(db) // zero, of either sign
	}
	return na == nb && ea == eb && bytes.Equal(da, db)
}

// decimalOf splits a number literal into its sign, its significant digits without leading
// or trailing zeros, and the exponent of the last of them: the value is ±digits×10^exp. A
// zero has no digits. ok is false when the exponent does not fit an int.
func decimalOf(lit []byte) (neg bool, digits []byte, exp int, ok bool) {
	if len(lit) > 0 && lit[0] == '-' {
		neg, lit = true, lit[1:]
	}
	mant := lit
	if i := bytes.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(string(lit[i+1:]))
		if err != nil {
			return false, nil, 0, false
		}
		exp, mant = e, lit[:i]
	}
	digits = make([]byte, 0, len(mant))
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		digits = append(append(digits, mant[:i]...), mant[i+1:]...)
		exp -= len(mant) - i - 1
	} else {
		digits = append(digits, mant...)
	}
	digits = bytes.TrimLeft(digits, "0")
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	return neg, digits, exp, true
}

// clipBytes shortens a literal for an error message.
func clipBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}
