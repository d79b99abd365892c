package protocol_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/iacp-node/iacp-node/protocol"
)

func addDocSeeds(f *testing.F) {
	m, err := newTestBuilder(f, "acme:host-1:planner").Request("acme:host-2:analyst", protocol.IntentQuery,
		map[string]any{"q": "é", "n": 1.5, "list": []any{1, "two", nil, true}})
	if err != nil {
		f.Fatal(err)
	}
	j, _ := protocol.EncodeJSON(m)
	y, _ := protocol.EncodeYAML(m)
	f.Add(j)
	f.Add(y)
	f.Add([]byte(docWithUnknowns))
	for _, c := range canonCases {
		f.Add([]byte(c))
	}
	f.Add([]byte("envelope:\n  version: '1.0'\n  x: &a [1, 2]\n  y: *a\nmessage: {payload: {k: 1e3, s: '1e3', t: yes}}\n"))
}

// FuzzDecode: the decoders never panic; whatever they accept re-encodes to a document that
// decodes again to the same thing, in JSON and in YAML, and can be canonicalised the same
// way as the reference implementation does it.
func FuzzDecode(f *testing.F) {
	addDocSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if protocol.DetectFormat(data) == protocol.JSON {
			// The shared decoding agrees with the copying one, in what it accepts and in what
			// it gives.
			in := bytes.Clone(data)
			ms, serr := protocol.DecodeJSONShared(in)
			mc, cerr := protocol.DecodeJSON(data)
			if (serr == nil) != (cerr == nil) {
				t.Fatalf("DecodeJSONShared says %v, DecodeJSON says %v", serr, cerr)
			}
			if serr == nil {
				a, _ := protocol.EncodeJSON(ms)
				b, _ := protocol.EncodeJSON(mc)
				if !bytes.Equal(a, b) || !bytes.Equal(in, data) {
					t.Fatalf("the shared decoding differs, or changed its input:\n%s\n%s", a, b)
				}
			}
		}
		m, err := protocol.Decode(data)
		if err != nil {
			if protocol.CodeOf(err) != protocol.CodePayloadInvalid {
				t.Fatalf("decode error with code %s: %v", protocol.CodeOf(err), err)
			}
			return
		}
		j1, err := protocol.EncodeJSON(m)
		if err != nil {
			t.Fatalf("decoded but cannot encode: %v", err)
		}
		m2, err := protocol.DecodeJSON(j1)
		if err != nil {
			t.Fatalf("re-encoded document does not decode: %v\n%s", err, j1)
		}
		j2, err := protocol.EncodeJSON(m2)
		if err != nil || !bytes.Equal(j1, j2) {
			t.Fatalf("decode -> encode is not stable (%v)\n%s\n%s", err, j1, j2)
		}
		c1, err := protocol.Canonical(m)
		if err != nil {
			t.Fatalf("decoded but cannot canonicalise: %v", err)
		}
		if ref, err := referenceCanonical(m); err != nil || !bytes.Equal(c1, ref) {
			t.Fatalf("canonical form differs from the reference (%v)\n got: %s\nwant: %s", err, c1, ref)
		}
		y, err := protocol.EncodeYAML(m)
		if err != nil {
			t.Fatalf("cannot encode as YAML: %v", err)
		}
		m3, err := protocol.DecodeYAML(y)
		if err != nil {
			t.Fatalf("YAML encoding does not decode: %v\n%s", err, y)
		}
		if c3, err := protocol.Canonical(m3); err != nil || !bytes.Equal(c1, c3) {
			t.Fatalf("YAML round trip changed the canonical form (%v)\n%s\n%s\nYAML:\n%s", err, c1, c3, y)
		}
	})
}

// FuzzCanonical: the direct RFC 8785 writer agrees with encoding/json + gowebpki/jcs on any
// payload and unknown member, in what it accepts and in the bytes it produces.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"a":1.50,"b":1e21}`, `{"b":[{"z":1,"a":2}],"a":"\u00e9"}`, `{"\ud83d\ude00":1,"\uffff":2}`,
		`{"n":-0,"m":0.1e-6,"k":123456789012345678901}`, `[1,"x",null]`, `"s\n"`, `{"a":{"a":{"a":{}}}}`} {
		f.Add([]byte(s), "x-ext")
	}
	f.Fuzz(func(t *testing.T, payload []byte, extName string) {
		m := validRequest(t)
		m.Message.Payload = json.RawMessage(payload)
		m.Envelope.Extra = protocol.Extra{extName: json.RawMessage(payload)}
		got, err := protocol.Canonical(m)
		want, rerr := referenceCanonical(m)
		if err != nil {
			if protocol.CodeOf(err) != protocol.CodePayloadInvalid {
				t.Fatalf("error code %s", protocol.CodeOf(err))
			}
			return // stricter than the reference is allowed (e.g. raw bytes that are not JSON)
		}
		if rerr != nil {
			t.Fatalf("Canonical accepts what the reference refuses (%v): %q", rerr, payload)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("canonical forms differ for %q\n got: %s\nwant: %s", payload, got, want)
		}
	})
}

// FuzzCanonicalJSON: CanonicalJSON agrees with gowebpki/jcs.Transform on any value it accepts,
// and takes back every canonical form the reference produced unchanged, so that what was
// signed over the reference's output (agent records, which discovery canonicalised with
// jcs.Transform before) still verifies. The only reference outputs it may refuse are those
// it refuses as input for reasons of its own: nesting beyond 64 levels and invalid UTF-8.
func FuzzCanonicalJSON(f *testing.F) {
	for _, c := range canonCases {
		f.Add([]byte(c))
	}
	for _, s := range []string{`{"a":1.50,"b":1e21}`, `{"b":[{"z":1,"a":2}],"a":"\u00e9 \u003c\u0026"}`,
		`{"n":-0,"m":0.1e-6,"k":123456789012345678901}`, `[1,"x",null,true,false]`, `"s\n"`, `-12.5e2`, ` {} `,
		`{"seq":"1780000000123456789","x":9007199254740993}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := protocol.CanonicalJSON(raw)
		if !json.Valid(raw) {
			if err == nil {
				t.Fatalf("CanonicalJSON accepts what is not one JSON value: %q", raw)
			}
			return
		}
		// The reference stumbles on white space around a top-level number; inside an array
		// it does not.
		want, rerr := jcs.Transform(append(append([]byte("["), raw...), ']'))
		if rerr == nil {
			want = want[1 : len(want)-1]
		}
		if err == nil {
			if rerr != nil {
				t.Fatalf("CanonicalJSON accepts what the reference refuses (%v): %q", rerr, raw)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("canonical forms differ for %q\n got: %s\nwant: %s", raw, got, want)
			}
		}
		if rerr != nil {
			return
		}
		again, err := protocol.CanonicalJSON(want)
		if err != nil {
			if strings.Contains(err.Error(), "nested too deeply") || !utf8.Valid(raw) {
				return
			}
			t.Fatalf("CanonicalJSON refuses the reference's canonical form %q of %q: %v", want, raw, err)
		}
		if !bytes.Equal(again, want) {
			t.Fatalf("CanonicalJSON changes the reference's canonical form %q into %q", want, again)
		}
	})
}

// FuzzReadFrame: ReadFrame never panics, never returns more than the limit, never allocates
// a buffer larger than the announced length, and returns exactly the announced bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, '{', '}'}, uint32(100))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint32(1<<24))
	f.Add([]byte{0, 0, 0, 0}, uint32(10))
	f.Add([]byte{0, 0, 1}, uint32(10))
	f.Add(binary.BigEndian.AppendUint32(nil, 70000), uint32(1<<20))
	f.Fuzz(func(t *testing.T, data []byte, max uint32) {
		limit := int(max % (1 << 24))
		body, err := protocol.ReadFrame(bytes.NewReader(data), limit)
		if limit <= 0 {
			limit = protocol.DefaultMaxMessageBytes
		}
		if err != nil {
			if body != nil {
				t.Fatal("a body with an error")
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, protocol.ErrEmptyFrame) &&
				!errors.Is(err, protocol.ErrFrameTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		n := int(binary.BigEndian.Uint32(data))
		if len(body) != n || n > limit || cap(body) > n {
			t.Fatalf("body of %d bytes (cap %d) for an announced %d, limit %d", len(body), cap(body), n, limit)
		}
		if !bytes.Equal(body, data[4:4+n]) {
			t.Fatal("body differs from the frame")
		}
	})
}

// FuzzValidate: Validate and Verify never panic on a decoded message, every failure they
// report carries a registered IACP code, and a Verifier with caches (shared across inputs, as
// a node's are across messages) answers as Verify without them, the first time and the next.
func FuzzValidate(f *testing.F) {
	addDocSeeds(f)
	cached := &protocol.Verifier{Keys: protocol.NewKeyCache(64), Verified: protocol.NewVerifyCache(64)}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := protocol.Decode(data)
		if err != nil {
			return
		}
		plain := protocol.Verify(m)
		for i := range 2 {
			if err := cached.Verify(m); (err == nil) != (plain == nil) {
				t.Fatalf("verification %d with caches: %v; without: %v", i+1, err, plain)
			}
		}
		for _, err := range []error{protocol.Validate(m, fixedNow, len(data), protocol.Limits{}), plain} {
			if err == nil {
				continue
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error without a code: %v", err)
			}
			if _, ok := protocol.Lookup(pe.Code); !ok {
				t.Fatalf("unregistered code %s", pe.Code)
			}
		}
	})
}
