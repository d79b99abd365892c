package a2abridge

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// JWKSPath is where the bridge serves the JSON Web Key Set of the key that signs its cards
// (RFC 7517): the jku of every card signature names it.
const JWKSPath = "/.well-known/jwks.json"

// jwsHeader is the protected header of a card signature (RFC 7515): EdDSA, the kid of the
// signing key (its peer id) and, when the key is served, the URL of the JWKS that holds it.
type jwsHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
	Jku string `json:"jku,omitempty"`
}

var b64 = base64.RawURLEncoding

// JWK is one public key of a JSON Web Key Set: an Ed25519 key (RFC 8037).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// JWKS is a JSON Web Key Set.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWKSOf is the key set that holds the public half of key (Ed25519), kid its peer id.
func JWKSOf(key crypto.PrivKey) (JWKS, error) {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return JWKS{}, err
	}
	raw, err := key.GetPublic().Raw()
	if err != nil || key.Type() != crypto.Ed25519 {
		return JWKS{}, fmt.Errorf("jwks: the key is %s; cards are signed with Ed25519 (EdDSA)", key.Type())
	}
	return JWKS{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(raw), Kid: id.String(), Alg: "EdDSA", Use: "sig"}}}, nil
}

// CanonicalCard is what a card signature covers: the card as A2A 1.0 defines it (the members
// of a2a.AgentCard, without the 0.3 members a union card also carries), without signatures,
// with every empty member left out (empty strings, lists and objects, required: false), in
// RFC 8785 canonical JSON. It is the canonical form A2A's SDKs sign and verify
// (canonicalizeAgentCard of @a2a-js/sdk 1.x: the card through its protobuf schema, which
// drops default values, then JCS).
func CanonicalCard(card *a2a.AgentCard) ([]byte, error) {
	c := *card
	c.Signatures = nil
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	cleaned, _ := clean(doc)
	raw, err = json.Marshal(cleaned)
	if err != nil {
		return nil, err
	}
	return protocol.CanonicalJSON(raw)
}

// clean drops the empty members of a JSON value, as protobuf's JSON form leaves default
// values out: "", null, [], {} (after cleaning what they hold) and an extension's required:
// false. keep is false when v itself is empty.
func clean(v any) (out any, keep bool) {
	switch v := v.(type) {
	case nil:
		return nil, false
	case string:
		return v, v != ""
	case []any:
		var kept []any
		for _, e := range v {
			if c, ok := clean(e); ok {
				kept = append(kept, c)
			}
		}
		return kept, len(kept) > 0
	case map[string]any:
		kept := map[string]any{}
		for k, e := range v {
			if k == "required" && e == false {
				continue
			}
			if c, ok := clean(e); ok {
				kept[k] = c
			}
		}
		return kept, len(kept) > 0
	}
	return v, true
}

// SignCard adds a JWS signature (RFC 7515, alg EdDSA, detached payload) to the card, made with
// the node's identity key over CanonicalCard. The protected header's kid is the key's peer
// id, and jku, when not "", the URL of the JWKS that holds the key under that kid (JWKSOf),
// where A2A verifiers fetch it.
func SignCard(card *a2a.AgentCard, key crypto.PrivKey, jku string) error {
	if key.Type() != crypto.Ed25519 {
		return fmt.Errorf("sign card: the key is %s; cards are signed with Ed25519 (EdDSA)", key.Type())
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return err
	}
	hdr, err := json.Marshal(jwsHeader{Alg: "EdDSA", Typ: "JOSE", Kid: id.String(), Jku: jku})
	if err != nil {
		return err
	}
	payload, err := CanonicalCard(card)
	if err != nil {
		return fmt.Errorf("sign card: %w", err)
	}
	protected := b64.EncodeToString(hdr)
	sig, err := key.Sign([]byte(protected + "." + b64.EncodeToString(payload)))
	if err != nil {
		return err
	}
	card.Signatures = append(card.Signatures, a2a.AgentCardSignature{Protected: protected, Signature: b64.EncodeToString(sig)})
	return nil
}

// VerifyCard checks the card's first signature and returns the peer id that made it: the
// header must say EdDSA, its kid must be a peer id with an Ed25519 key (the key is in the
// peer id: no JWKS is fetched), and the signature must cover the card as it is now.
func VerifyCard(card *a2a.AgentCard) (peer.ID, error) {
	if len(card.Signatures) == 0 {
		return "", fmt.Errorf("verify card: the card is not signed")
	}
	s := card.Signatures[0]
	raw, err := b64.DecodeString(s.Protected)
	if err != nil {
		return "", fmt.Errorf("verify card: protected header: %w", err)
	}
	var hdr jwsHeader
	if err := json.Unmarshal(raw, &hdr); err != nil || hdr.Alg != "EdDSA" {
		return "", fmt.Errorf("verify card: the protected header is not an EdDSA JWS header: %s", raw)
	}
	id, err := peer.Decode(hdr.Kid)
	if err != nil {
		return "", fmt.Errorf("verify card: kid %q is not a peer id: %w", hdr.Kid, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return "", fmt.Errorf("verify card: kid %s holds no public key: %w", id, err)
	}
	rawPub, err := pub.Raw()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return "", fmt.Errorf("verify card: kid %s is not an Ed25519 key", id)
	}
	sig, err := b64.DecodeString(s.Signature)
	if err != nil {
		return "", fmt.Errorf("verify card: signature: %w", err)
	}
	payload, err := CanonicalCard(card)
	if err != nil {
		return "", fmt.Errorf("verify card: %w", err)
	}
	if !ed25519.Verify(ed25519.PublicKey(rawPub), []byte(s.Protected+"."+b64.EncodeToString(payload)), sig) {
		return "", fmt.Errorf("verify card: the signature does not verify: the card was changed or signed by another key")
	}
	return id, nil
}
