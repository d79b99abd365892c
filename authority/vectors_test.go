package authority

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
)

var update = flag.Bool("update", false, "rewrite docs/test-vectors/a2acp-tokens.json from the generator")

// tokenVectorFile holds the A2ACP token vectors, relative to this package.
const tokenVectorFile = "../docs/test-vectors/a2acp-tokens.json"

// tokenVectors is the content of a2acp-tokens.json.
type tokenVectors struct {
	Description string           `json:"description"`
	Keys        []tokenVectorKey `json:"keys"`
	SkewSeconds int              `json:"skew_seconds"`
	Valid       []tokenVector    `json:"valid"`
	Invalid     []tokenVector    `json:"invalid"`
}

// tokenVectorKey is one fixed key.
type tokenVectorKey struct {
	Name         string `json:"name"`
	SeedHex      string `json:"seed_hex"`
	PublicKeyHex string `json:"public_key_hex"`
	PeerID       string `json:"peer_id"`
}

// tokenVector is one token and the call it is validated for; an invalid one has the rule it
// breaks and the IACP code of the refusal, a valid one its claims.
type tokenVector struct {
	Name     string         `json:"name"`
	Token    string         `json:"token"`
	Now      string         `json:"now"`
	Target   string         `json:"target"`
	Required []string       `json:"required"`
	Claims   map[string]any `json:"claims,omitempty"`
	Rule     int            `json:"rule,omitempty"`
	RuleName string         `json:"rule_name,omitempty"`
	Code     string         `json:"code,omitempty"`
}

// generateTokenVectors builds the vectors from the fixed keys and clock.
func generateTokenVectors(t *testing.T) []byte {
	f := newFixture(t)
	valid, invalid := tokenCases(t, f)
	vec := func(c tokenCase) tokenVector {
		v := tokenVector{Name: c.name, Token: c.raw, Now: c.now.UTC().Format(time.RFC3339), Target: c.target, Required: c.required}
		if c.rule == 0 {
			v.Claims = claimsOf(t, c.raw)
		} else {
			v.Rule, v.RuleName, v.Code = int(c.rule), c.rule.String(), string(c.rule.Code())
		}
		return v
	}
	out := tokenVectors{
		Description: "A2ACP authorization tokens (EdDSA JWT) of an iacp-node mesh authority, validated by the A2ACP draft's " +
			"five rules at \"now\" for a call to \"target\" needing \"required\"; see README.md",
		SkewSeconds: int(DefaultSkew / time.Second),
		Valid:       []tokenVector{vec(valid)},
	}
	for _, k := range []struct{ name, seed string }{{"authority", seedAuthority}, {"other", seedOther}} {
		key := seedKey(t, k.seed)
		pub, _ := key.GetPublic().Raw()
		out.Keys = append(out.Keys, tokenVectorKey{k.name, k.seed, hex.EncodeToString(pub), peerOfKey(t, key).String()})
	}
	for _, c := range invalid {
		out.Invalid = append(out.Invalid, vec(c))
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestTokenVectors regenerates the vectors and requires the file to be the same, then checks
// every vector in the file with a Verifier built from the file's authority key alone.
func TestTokenVectors(t *testing.T) {
	generated := generateTokenVectors(t)
	if *update {
		if err := os.WriteFile(tokenVectorFile, generated, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(tokenVectorFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, generated) {
		t.Fatalf("%s differs from what the generator makes; run go test ./authority -run TestTokenVectors -update if the change is intended", tokenVectorFile)
	}
	var vs tokenVectors
	if err := json.Unmarshal(file, &vs); err != nil {
		t.Fatal(err)
	}
	pub, err := hex.DecodeString(vs.Keys[0].PublicKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	key, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	check := func(v tokenVector) error {
		now, err := time.Parse(time.RFC3339, v.Now)
		if err != nil {
			t.Fatal(err)
		}
		ver := NewVerifier(key, WithVerifierClock(func() time.Time { return now }), WithSkew(time.Duration(vs.SkewSeconds)*time.Second))
		if ver.MeshID() != vs.Keys[0].PeerID {
			t.Fatalf("mesh id %s, file says %s", ver.MeshID(), vs.Keys[0].PeerID)
		}
		_, err = ver.Token(v.Token, v.Target, v.Required)
		return err
	}
	for _, v := range vs.Valid {
		if err := check(v); err != nil {
			t.Errorf("valid %s: %v", v.Name, err)
		}
	}
	for _, v := range vs.Invalid {
		var re *RuleError
		if err := check(v); !errors.As(err, &re) || int(re.Rule) != v.Rule || string(re.Code()) != v.Code {
			t.Errorf("invalid %s: %v, want rule %d %s", v.Name, err, v.Rule, v.Code)
		}
	}
	if len(vs.Valid) != 1 || len(vs.Invalid) < 5 {
		t.Fatalf("%d valid and %d invalid vectors", len(vs.Valid), len(vs.Invalid))
	}
}
