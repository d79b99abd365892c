package protocol_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// canonCases are documents that exercise RFC 8785's number, string and ordering rules.
var canonCases = map[string]string{
	"numbers":    `{"envelope":{"version":"1.0","ttl_seconds":9007199254740992},"message":{"payload":{"a":1.50,"b":1e21,"c":-0,"d":0.000001,"e":1e-7,"f":123456789012345680,"g":-12.0e2,"h":123456789012345680000}}}`,
	"strings":    `{"envelope":{"version":"1.0"},"message":{"payload":{"s":"caf\u00e9 \ud83d\ude00 \u2028 \u001f\/\"\\\b\f\n\r\t <>&","t":"\u00e9t\u00e9","emoji":"😀"}}}`,
	"ordering":   `{"z":1,"envelope":{"sender":{"x-é":1,"x-😀":2,"x-\ufb01":3,"agent_id":"a:b:c","identity_sig":"AAAA"}},"message":{"payload":{"\u20ac":1,"\r":2,"1":3,"\ud83d\ude00":4,"\u0080":5,"\u00f6":6}},"a":[{"b":2,"a":1}]}`,
	"nulls":      `{"envelope":{"version":null,"sender":{"identity_sig":null,"peer_id":null}},"message":null}`,
	"whitespace": "{ \"envelope\" : { \"version\" : \"1.0\" } , \"message\" : { \"payload\" : { \"a\" : [ 1 , 2 , { } , [ ] ] } } , \"x-extra\" : { \"k\" : true , \"n\" : false } }",
	"pair":       `{"envelope":{"message_id":"\ud83d\ude00x"},"message":{"payload":{"\ud83d\ude00":"\uDBFF\uDFFF","\uffff":0}}}`,
}

func TestCanonical_MatchesReferenceImplementation(t *testing.T) {
	for name, doc := range canonCases {
		t.Run(name, func(t *testing.T) {
			m, err := protocol.DecodeJSON([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			checkCanonicalAgainstReference(t, m)
		})
	}
}

func checkCanonicalAgainstReference(t *testing.T, m *protocol.Message) {
	t.Helper()
	got, err := protocol.Canonical(m)
	want, rerr := referenceCanonical(m)
	if (err != nil) != (rerr != nil) {
		t.Fatalf("Canonical error %v, reference error %v", err, rerr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("Canonical differs from the reference\n got: %s\nwant: %s", got, want)
	}
}

// A raw member that is not I-JSON cannot be canonicalised; both implementations refuse it.
func TestCanonical_RefusesWhatRFC8785CannotRepresent(t *testing.T) {
	for name, payload := range map[string]string{
		"overflowing number": `{"h":[1E400]}`,
		"lone surrogate":     `{"s":"\ud800x"}`,
		"duplicate member":   `{"a":1,"a":2}`,
		"not JSON":           `{"a":}`,
	} {
		t.Run(name, func(t *testing.T) {
			m := validRequest(t)
			m.Message.Payload = json.RawMessage(payload)
			_, err := protocol.Canonical(m)
			wantCode(t, err, protocol.CodePayloadInvalid)
			if _, rerr := referenceCanonical(m); rerr == nil {
				t.Fatal("the reference implementation accepts it")
			}
		})
	}
}
