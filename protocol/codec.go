package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Format is a document encoding.
type Format string

// The two encodings of a document. JSON is the wire format; YAML is for people
// (docs/protocol.md, "Drafts": wire format).
const (
	JSON Format = "json"
	YAML Format = "yaml"
)

// ParseFormat accepts "json", "yaml" or "yml".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "json":
		return JSON, nil
	case "yaml", "yml":
		return YAML, nil
	}
	return "", fmt.Errorf("unknown format %q: use json or yaml", s)
}

// DecodeJSON decodes one JSON document. Its errors are *Error with code PAYLOAD_INVALID. The
// caller bounds len(data); DecodeJSON allocates in proportion to it.
func DecodeJSON(data []byte) (*Message, error) {
	if !utf8.Valid(data) {
		return nil, Errorf(CodePayloadInvalid, "document is not valid UTF-8")
	}
	var m Message
	if err := decodeWhole(data, m.decode); err != nil {
		return nil, Errorf(CodePayloadInvalid, "malformed JSON document: %w", err)
	}
	return &m, nil
}

// DecodeJSONShared is DecodeJSON without copies: the message's raw members (payload and
// unknown fields) are views of data, which must therefore not change while the message is
// in use. It is for a caller that keeps data as it is anyway, such as a frame read from a
// stream and stored verbatim: a 16 MiB frame then costs 16 MiB, not 32.
func DecodeJSONShared(data []byte) (*Message, error) {
	if !utf8.Valid(data) {
		return nil, Errorf(CodePayloadInvalid, "document is not valid UTF-8")
	}
	var m Message
	s := scanner{data: data, shared: true}
	err := m.decode(&s)
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, Errorf(CodePayloadInvalid, "malformed JSON document: %w", err)
	}
	return &m, nil
}

// EncodeJSON encodes m as compact JSON, the wire format: known members in the order of the
// draft, then unknown ones sorted by name. Raw members (payload, unknown fields) are
// validated and compacted.
func EncodeJSON(m *Message) ([]byte, error) {
	return m.appendDoc(make([]byte, 0, m.sizeHint()), wireForm)
}

// DecodeYAML decodes one YAML document by converting it to JSON first, so that both formats
// yield the same Message. The JSON may be at most DefaultMaxMessageBytes; see YAMLToJSON.
func DecodeYAML(data []byte) (*Message, error) {
	return DecodeYAMLLimit(data, DefaultMaxMessageBytes)
}

// DecodeYAMLLimit is DecodeYAML with a bound on the JSON the document expands to: an input
// that expands further is refused, as an *Error with code PAYLOAD_INVALID that wraps
// ErrDocumentTooLarge, before the expansion is complete.
func DecodeYAMLLimit(data []byte, maxJSON int) (*Message, error) {
	j, err := YAMLToJSONLimit(data, maxJSON)
	if err != nil {
		return nil, Errorf(CodePayloadInvalid, "malformed YAML document: %w", err)
	}
	return DecodeJSON(j)
}

// EncodeYAML encodes m as block-style YAML with the members in the order JSON has them.
func EncodeYAML(m *Message) ([]byte, error) {
	j, err := EncodeJSON(m)
	if err != nil {
		return nil, err
	}
	return JSONToYAML(j)
}

// Decode detects the format (a document whose first non-space byte is '{' is JSON, anything
// else is YAML) and decodes it.
func Decode(data []byte) (*Message, error) {
	if DetectFormat(data) == JSON {
		return DecodeJSON(data)
	}
	return DecodeYAML(data)
}

// DetectFormat tells JSON from YAML by the first non-space byte.
func DetectFormat(data []byte) Format {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(t) > 0 && t[0] == '{' {
		return JSON
	}
	return YAML
}

// Encode encodes m in the given format.
func Encode(m *Message, f Format) ([]byte, error) {
	if f == YAML {
		return EncodeYAML(m)
	}
	return EncodeJSON(m)
}

// MaxYAMLBytes bounds a YAML document on input: 1 MiB. Parsing YAML builds a tree of about
// 100 bytes of memory per byte of input in the worst case (a flow sequence of one-digit
// numbers: 118 MiB for 1 MiB, measured), before anything can be checked, so the input itself
// must be small. YAML is for documents people write; larger documents travel as JSON.
const MaxYAMLBytes = 1 << 20

// maxYAMLNodes bounds the nodes one document may expand to, aliases included.
const maxYAMLNodes = 1 << 20

// ErrDocumentTooLarge is wrapped by the errors of YAMLToJSONLimit (and DecodeYAMLLimit) when
// the input is over MaxYAMLBytes or expands to more JSON than allowed: the document is too
// large, whatever else is wrong with it. An HTTP binding answers it with 413.
var ErrDocumentTooLarge = errors.New("document too large")

// YAMLToJSON converts one YAML document to JSON, keeping member order, into at most
// DefaultMaxMessageBytes of JSON. See YAMLToJSONLimit.
func YAMLToJSON(data []byte) ([]byte, error) { return YAMLToJSONLimit(data, DefaultMaxMessageBytes) }

// YAMLToJSONLimit converts one YAML document to JSON, keeping member order. Only what JSON
// can express is accepted: string keys, no infinities or NaN, and exactly one document. The
// input may be at most MaxYAMLBytes, and the JSON at most maxJSON bytes (DefaultMaxMessageBytes
// when maxJSON <= 0): the bytes are counted while aliases are expanded, so an alias bomb is
// refused as soon as it passes the bound, with ErrDocumentTooLarge, and memory stays flat.
func YAMLToJSONLimit(data []byte, maxJSON int) ([]byte, error) {
	if maxJSON <= 0 {
		maxJSON = DefaultMaxMessageBytes
	}
	if len(data) > MaxYAMLBytes {
		return nil, fmt.Errorf("%w: YAML input is %d bytes; at most %d are accepted (send larger documents as JSON)",
			ErrDocumentTooLarge, len(data), MaxYAMLBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty document")
		}
		return nil, err
	}
	if doc.Kind == 0 {
		return nil, errors.New("empty document")
	}
	// A stream of several documents is refused rather than silently cut to its first one.
	var next yaml.Node
	if err := dec.Decode(&next); err != io.EOF {
		return nil, errors.New("expected exactly one document")
	}
	c := yamlConv{budget: maxYAMLNodes, max: maxJSON}
	if err := c.node(&doc, 0); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

// yamlConv writes JSON from a YAML tree within a node budget and a byte bound.
type yamlConv struct {
	buf    bytes.Buffer
	budget int // nodes left
	max    int // bytes of JSON allowed
}

func (c *yamlConv) full() error {
	if c.buf.Len() > c.max {
		return fmt.Errorf("%w: the document expands to more than %d bytes of JSON (aliases are expanded)", ErrDocumentTooLarge, c.max)
	}
	return nil
}

func (c *yamlConv) node(n *yaml.Node, depth int) error {
	if c.budget--; c.budget < 0 {
		return fmt.Errorf("%w: the document expands to more than %d nodes (aliases are expanded)", ErrDocumentTooLarge, maxYAMLNodes)
	}
	if depth > 64 {
		return errors.New("document nested too deeply")
	}
	buf := &c.buf
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("expected exactly one document")
		}
		return c.node(n.Content[0], depth)
	case yaml.AliasNode:
		return c.node(n.Alias, depth+1)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.ShortTag() != "!!str" && k.ShortTag() != "!!int" && k.ShortTag() != "!!bool") {
				return fmt.Errorf("line %d: mapping keys must be strings (merge keys are not supported)", k.Line)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(appendCanonString(buf.AvailableBuffer(), k.Value))
			buf.WriteByte(':')
			if err := c.full(); err != nil {
				return err
			}
			if err := c.node(v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := c.node(e, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		if err := yamlScalarToJSON(buf, n); err != nil {
			return err
		}
	default:
		return fmt.Errorf("line %d: unsupported YAML node", n.Line)
	}
	return c.full()
}

func yamlScalarToJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return err
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int", "!!float":
		// A number written as JSON writes it is kept as written, so that JSON's rule holds
		// for it too (DecodeJSON refuses a literal that is not exactly its double); YAML's
		// own forms (0x1F, 1_000, .5, +1) are converted.
		if isJSONNumber(n.Value) {
			buf.WriteString(n.Value)
			return nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %s is not a JSON number", n.Line, n.Value)
		}
		buf.Write(b)
	case "!!str", "!!binary", "!!timestamp":
		buf.Write(appendCanonString(buf.AvailableBuffer(), n.Value)) // no HTML escapes: < stays <
	default:
		return fmt.Errorf("line %d: unsupported YAML tag %s", n.Line, n.ShortTag())
	}
	return nil
}

// isJSONNumber reports whether s is a number literal as JSON writes one (RFC 8259).
func isJSONNumber(s string) bool {
	sc := scanner{data: []byte(s)}
	if c := sc.peek(); c != '-' && (c < '0' || c > '9') {
		return false
	}
	_, err := sc.number()
	return err == nil && sc.i == len(s)
}

// JSONToYAML converts one JSON value to block-style YAML, keeping member order and the exact
// number literals.
func JSONToYAML(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := jsonToNode(dec)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func jsonToNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				v, err := jsonToNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := jsonToNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			_, err := dec.Token()
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if _, err := strconv.ParseInt(string(t), 10, 64); err != nil {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t)}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}
