package protocol_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// An integer above 2^53 in a signed payload could be rewritten by a relay
// (9007199254740993 to ...992 or 9.007199254740992e15) without breaking the signature, as
// RFC 8785 signs the double. A number literal must denote exactly the number its canonical
// form prints.
func TestSecurity_NumbersThatDoNotRoundTripAreRefused(t *testing.T) {
	for _, lit := range []string{
		"9007199254740993", "-9007199254740993", "123456789012345678901", "123456789012345678",
		"0.1000000000000000055511151231257827", "1e-400", "18446744073709551615",
	} {
		t.Run(lit, func(t *testing.T) {
			m := validRequest(t)
			m.Message.Payload = json.RawMessage(`{"n":` + lit + `}`)
			if _, err := protocol.EncodeJSON(m); err == nil {
				t.Fatalf("EncodeJSON accepted %s", lit)
			}
			raw := []byte(strings.Replace(`{"envelope":{"version":"1.0"},"message":{"payload":{"n":N}}}`, "N", lit, 1))
			_, err := protocol.DecodeJSON(raw)
			wantCode(t, err, protocol.CodePayloadInvalid)
			if !strings.Contains(err.Error(), "send it as a string") {
				t.Fatalf("the refusal does not say what to do: %v", err)
			}
		})
	}
}

func TestSecurity_NumbersThatRoundTripAreKept(t *testing.T) {
	for _, lit := range []string{
		"0", "-0", "1.50", "1e21", "1E-7", "-12.5e2", "0.000001", "9007199254740992", "123456789012345680000",
		"0.1", "3.141592653589793", "1.7976931348623157e308", "5e-324", "100000000000000000000000",
	} {
		t.Run(lit, func(t *testing.T) {
			raw := []byte(strings.Replace(`{"envelope":{"version":"1.0"},"message":{"payload":{"n":N}}}`, "N", lit, 1))
			m, err := protocol.DecodeJSON(raw)
			if err != nil {
				t.Fatalf("%s refused: %v", lit, err)
			}
			if _, err := protocol.Canonical(m); err != nil {
				t.Fatalf("%s not canonicalised: %v", lit, err)
			}
		})
	}
}

// Known integer members are held to the same rule: ttl_seconds above 2^53 does not decode.
func TestSecurity_KnownIntegersBeyondTwoToThe53AreRefused(t *testing.T) {
	_, err := protocol.DecodeJSON([]byte(`{"envelope":{"ttl_seconds":9007199254740993}}`))
	wantCode(t, err, protocol.CodePayloadInvalid)
}

// FuzzNumberLiteral: a number is accepted exactly when it is, as an exact rational, the
// number its canonical form prints.
func FuzzNumberLiteral(f *testing.F) {
	for _, s := range []string{"9007199254740993", "1.50", "1e21", "-0", "0.1", "123456789012345678901", "1e-400", "5e-324", "12.5e-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if len(lit) > 64 || strings.ContainsAny(lit, "eE") && len(lit) > 24 {
			return // keep big.Rat's exponent work small
		}
		raw := []byte(`{"envelope":{"version":"1.0"},"message":{"payload":{"n":` + lit + `}}}`)
		m, err := protocol.DecodeJSON(raw)
		if err != nil {
			return // not a number, not finite, or not exact: refused
		}
		c, err := protocol.Canonical(m)
		if err != nil {
			t.Fatalf("decoded but not canonicalised: %v", err)
		}
		var got struct {
			Message struct {
				Payload struct {
					N json.Number `json:"n"`
				} `json:"payload"`
			} `json:"message"`
		}
		if err := json.Unmarshal(c, &got); err != nil || got.Message.Payload.N == "" {
			return // the literal was not a lone number (e.g. "1,\"x\":2")
		}
		want, ok1 := new(big.Rat).SetString(lit)
		have, ok2 := new(big.Rat).SetString(string(got.Message.Payload.N))
		if ok1 && ok2 && want.Cmp(have) != 0 {
			t.Fatalf("%s accepted, but its canonical form %s is another number", lit, got.Message.Payload.N)
		}
	})
}
