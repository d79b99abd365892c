package dialect

import (
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// benchIACP is an IACP document with a payload of some size, what most clients post.
func benchIACP() []byte {
	return []byte(`{"envelope":{"version":"0.1","recipient":{"agent_id":"b"}},"message":{"type":"request","intent":"handoff","payload":{"items":[` +
		strings.Repeat(`{"name":"an item","tags":["a","b","c"],"n":12345.5},`, 500) + `{}]}}}`)
}

// Recognising an IACP document, which the API does for every JSON document posted to it,
// costs no more than the IACP decode that follows it (BenchmarkDecodeJSONIACP).
func BenchmarkRecogniseIACP(b *testing.B) {
	doc := benchIACP()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if d, err := Recognise(doc); d != IACP || err != nil {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkDecodeJSONIACP(b *testing.B) {
	doc := benchIACP()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.DecodeJSON(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// The API's pre-check of a document that mentions no foreign mark is a byte search.
func BenchmarkMayBeForeignIACP(b *testing.B) {
	doc := benchIACP()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if MayBeForeign(doc) {
			b.Fatal("an IACP document without marks")
		}
	}
}

// The translation an API request/response in another dialect costs: the request in
// (Recognise, Decode, ToIACP, Message) and the answer out (FromIACP), for ElizaOS section
// 4.1's TASK_REQUEST and a TASK_ACCEPT.
func BenchmarkTranslateElizaOSRoundTrip(b *testing.B) {
	benchRoundTrip(b, ElizaOS, "s4.1-task-request.json")
}

// The same for A2ACP's request example, which is also checked against the draft's JSON Schema
// on the way in and on the way out, and its answer, a response.
func BenchmarkTranslateA2ACPRoundTrip(b *testing.B) {
	benchRoundTrip(b, A2ACP, "request.json")
}

// benchRoundTrip translates the example name of dialect d to IACP and an accepting answer to
// it back to d, once per iteration.
func benchRoundTrip(b *testing.B, d Dialect, name string) {
	doc := examples(b, d)[name]
	if doc == nil {
		b.Fatalf("no example %s of %s", name, d)
	}
	bl := builder(b)
	answer, err := bl.Response(mustMessage(b, doc, bl), protocol.ResponseAccepted, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		mustMessage(b, doc, nil)
		if _, err := FromIACP(answer, d); err != nil {
			b.Fatal(err)
		}
	}
}

// mustMessage translates doc to its IACP message, sealed by bl when bl is not nil.
func mustMessage(b *testing.B, doc []byte, bl *protocol.Builder) *protocol.Message {
	d, err := Recognise(doc)
	if err != nil {
		b.Fatal(err)
	}
	dec, err := Decode(d, doc)
	if err != nil {
		b.Fatal(err)
	}
	draft, err := ToIACP(dec, now)
	if err != nil {
		b.Fatal(err)
	}
	m, err := draft.Message()
	if err != nil {
		b.Fatal(err)
	}
	if bl != nil {
		if err := bl.Seal(m); err != nil {
			b.Fatal(err)
		}
	}
	return m
}
