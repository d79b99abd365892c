package dialect

import (
	"bytes"
	_ "embed" // the A2ACP draft's schema
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/iacp-node/iacp-node/protocol"
)

// a2acpSchemaJSON is the A2ACP draft's "Base Message Schema" (specs/003), verbatim: a test
// compares it with the draft.
//
//go:embed a2acp.schema.json
var a2acpSchemaJSON []byte

// a2acpSchemaURL names the schema to the compiler, which loads nothing from it: the schema is
// added as a resource under that name, and the compiler's loader reads no other URL.
const a2acpSchemaURL = "https://iacp-node.invalid/specs/003/a2acp.schema.json"

// a2acpSchema is the compiled schema, compiled on first use. Formats are asserted: the draft
// says message_id is a uuid and timestamp a date-time, and a format is otherwise only an
// annotation to the library.
var a2acpSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(a2acpSchemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(a2acpSchemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(a2acpSchemaURL)
})

// a2acpSchemaCheck validates a document's members against the schema. A refusal is
// PAYLOAD_INVALID naming one problem (schemaProblem).
func a2acpSchemaCheck(m Members) error {
	sch, err := a2acpSchema()
	if err != nil {
		return protocol.Errorf(protocol.CodeInternalError, "dialect: the A2ACP schema does not compile: %v", err)
	}
	inst := make(map[string]any, len(m))
	for k, v := range m {
		if inst[k], err = schemaValue(v, 0); err != nil {
			return invalid(A2ACP, pointer([]string{k}), "is not valid JSON: %v", err)
		}
	}
	if err := sch.Validate(inst); err != nil {
		return schemaProblem(err)
	}
	return nil
}

// schemaValue is jsonschema.UnmarshalJSON(raw): the value as the validator expects it, numbers
// as json.Number. The top two levels, which the schema reads, are built from protocol's
// scanner, that reads them at depth 0 and 1 anyway; a deeper object or array, and anything
// the scanner refuses, is left to UnmarshalJSON itself.
func schemaValue(raw []byte, depth int) (any, error) {
	if len(raw) > 0 {
		switch c := raw[0]; {
		case c == '{' && depth < 2:
			if obj, ok := schemaObject(raw, depth); ok {
				return obj, nil
			}
		case c == '"':
			if s, ok := unquote(raw); ok {
				return s, nil
			}
		case c == '-' || c >= '0' && c <= '9':
			if _, err := protocol.ObjectMembers(raw, func(string, []byte) {}); err == nil {
				return json.Number(raw), nil
			}
		case string(raw) == "true", string(raw) == "false":
			return raw[0] == 't', nil
		case string(raw) == "null":
			return nil, nil
		}
	}
	// UnmarshalJSON keeps numbers as json.Number, which the validator expects.
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// schemaObject is schemaValue of an object at depth; ok is false when protocol's scanner
// refuses it.
func schemaObject(raw []byte, depth int) (map[string]any, bool) {
	obj := map[string]any{}
	var ferr error
	isObject, err := protocol.ObjectMembers(raw, func(name string, v []byte) {
		if ferr == nil {
			obj[strings.Clone(name)], ferr = schemaValue(v, depth+1)
		}
	})
	return obj, err == nil && ferr == nil && isObject
}

// schemaLeaf is one thing the schema found wrong: where (a JSON pointer) and what.
type schemaLeaf struct{ at, what string }

// schemaProblem turns the library's tree of errors into one line: the first problem by JSON
// pointer (the library visits an object's members in map order, so this keeps the error of a
// document the same from run to run), with a count of the others.
func schemaProblem(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return protocol.Errorf(protocol.CodePayloadInvalid, "a2acp document: %v", err)
	}
	leaves := schemaLeaves(ve, nil)
	if len(leaves) == 0 { // the library always names a cause; be safe
		return protocol.Errorf(protocol.CodePayloadInvalid, "a2acp document: breaks the draft's schema")
	}
	sort.Slice(leaves, func(i, j int) bool {
		if leaves[i].at != leaves[j].at {
			return leaves[i].at < leaves[j].at
		}
		return leaves[i].what < leaves[j].what
	})
	more := ""
	switch n := len(leaves) - 1; {
	case n == 1:
		more = " (and 1 more problem)"
	case n > 1:
		more = fmt.Sprintf(" (and %d more problems)", n)
	}
	return invalid(A2ACP, leaves[0].at, "%s%s", leaves[0].what, more)
}

// schemaLeaves collects the leaves of an error tree: the errors with no causes.
func schemaLeaves(e *jsonschema.ValidationError, out []schemaLeaf) []schemaLeaf {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			out = schemaLeaves(c, out)
		}
		return out
	}
	at := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			out = append(out, schemaLeaf{pointer(append(slices.Clone(e.InstanceLocation), name)), "is required"})
		}
		return out
	case *kind.Type:
		return append(out, schemaLeaf{at, fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)})
	case *kind.Pattern:
		return append(out, schemaLeaf{at, fmt.Sprintf("%s does not match pattern %s", shown(k.Got), k.Want)})
	case *kind.Format:
		return append(out, schemaLeaf{at, fmt.Sprintf("%s is not a valid %s: %v", shown(k.Got), k.Want, k.Err)})
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		return append(out, schemaLeaf{at, fmt.Sprintf("%s is not one of %s", shown(k.Got), strings.Join(want, ", "))})
	}
	// Other keywords, which this schema does not use: the library's own words.
	_, what, _ := strings.Cut(e.Error(), "': ")
	return append(out, schemaLeaf{at, what})
}

// pointer writes an instance location as an RFC 6901 JSON pointer.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return "the document"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// shown writes a value that broke the schema, short.
func shown(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(clip(v))
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return clip(fmt.Sprint(v))
}
