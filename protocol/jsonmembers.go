package protocol

// ObjectMembers reads raw, one JSON value, under CanonicalJSON's rules (RFC 8259, no duplicate
// member name at any level, number literals that a double holds exactly, nesting of at most 64
// levels) in one pass that writes nothing, and, when the value is an object, calls member for
// each of its members in document order. A member's name is unescaped as encoding/json
// unescapes it, and may point into raw (copy it to keep it); its value is a view of raw,
// without the white space around it. isObject is false for any other valid value. A refusal
// is the error CanonicalJSON gives for raw, so that the two say the same of one document;
// member may have been called for the members before the fault.
//
// It validates a document and splits it into its members at a fraction of the cost of
// CanonicalJSON followed by encoding/json: package dialect reads every foreign document with it.
func ObjectMembers(raw []byte, member func(name string, value []byte)) (isObject bool, err error) {
	s := scanner{data: raw}
	if s.peek() == '{' {
		isObject = true
		err = s.object(func(name string) error {
			v, err := s.skip()
			if err == nil {
				member(name, v)
			}
			return err
		})
	} else {
		err = s.skipValue()
	}
	if err == nil {
		err = s.end()
	}
	if err != nil {
		if _, cerr := CanonicalJSON(raw); cerr != nil {
			err = cerr
		}
		return false, err
	}
	return isObject, nil
}
