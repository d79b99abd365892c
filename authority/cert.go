package authority

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// Certificate lifetimes and size.
const (
	// DefaultCertTTL is a certificate's lifetime when CertRequest.TTL is zero: a month, so
	// that an agent renews well before a forgotten revocation matters.
	DefaultCertTTL = 30 * 24 * time.Hour
	// MaxCertTTL is the longest lifetime Issue grants: a year.
	MaxCertTTL = 365 * 24 * time.Hour
	// MaxCertBytes bounds a certificate: Issue refuses to sign a larger one and
	// Verifier.Certificate refuses to parse one. Eight KiB leave room for a few hundred
	// capability and permission names.
	MaxCertBytes = 8 << 10
)

// CertRequest is what Issue certifies: that AgentID belongs to the holder of Peer's key.
type CertRequest struct {
	// AgentID is the agent id (namespace:host:name); its namespace becomes the "ns" claim.
	AgentID string
	// Peer is the libp2p peer the agent runs on; it must be an Ed25519 peer id, whose key
	// goes into the "cnf" claim.
	Peer peer.ID
	// Capabilities and Permissions are copied into the claims of the same names.
	Capabilities []string
	Permissions  []string
	// TTL is the lifetime: DefaultCertTTL when zero, at most MaxCertTTL.
	TTL time.Duration
	// HeldSince is when the authority first certified AgentID on Peer: zero for a first
	// certificate (it holds since its issue), the predecessor's HeldSince for a renewal. It
	// becomes the "held_since" claim, which decides between two certificates of one agent id
	// on two peers (Precedes).
	HeldSince time.Time
}

// Certificate is a signed certificate and its claims. It is read-only once a Verifier made
// it: Verifiers that share a CertCache hand the same Certificate to every caller.
type Certificate struct {
	// Raw is the compact JWS, what is sent and stored.
	Raw string
	// ID is the "jti", by which the certificate is revoked.
	ID string
	// Issuer is the "iss": the mesh id.
	Issuer string
	// AgentID is the "sub" and Namespace the "ns" claim.
	AgentID   string
	Namespace string
	// Peer is the peer whose key the "cnf" claim holds.
	Peer         peer.ID
	Capabilities []string
	Permissions  []string
	// IssuedAt, NotBefore and Expires are "iat", "nbf" and "exp".
	IssuedAt, NotBefore, Expires time.Time
	// HeldSince is the "held_since" claim: when the authority first certified the agent on
	// this peer, carried over by every renewal. A certificate without the claim holds since
	// its IssuedAt.
	HeldSince time.Time
}

// Precedes reports whether c holds its agent id before o does: the earlier HeldSince, then the
// earlier IssuedAt, then the smaller ID. An authority certifies one peer per agent id, but two
// certificates for one id on two peers can still meet (issued by hand, or by a copy of the
// authority key); every node then picks the same one, the agent's first holder, whatever order
// it heard them in.
func (c *Certificate) Precedes(o *Certificate) bool {
	if !c.HeldSince.Equal(o.HeldSince) {
		return c.HeldSince.Before(o.HeldSince)
	}
	if !c.IssuedAt.Equal(o.IssuedAt) {
		return c.IssuedAt.Before(o.IssuedAt)
	}
	return c.ID < o.ID
}

// certClaims are the claims of a certificate.
type certClaims struct {
	jwt.RegisteredClaims
	Namespace    string        `json:"ns"`
	Capabilities []string      `json:"capabilities"`
	Permissions  []string      `json:"permissions"`
	Cnf          *confirmation `json:"cnf,omitempty"`
	// HeldSince is omitted when it equals iat (a first certificate), so that a first
	// certificate's claims are the same as before the claim existed.
	HeldSince *jwt.NumericDate `json:"held_since,omitempty"`
}

// confirmation is the RFC 7800 "cnf" claim: the key of the certificate's holder.
type confirmation struct {
	JWK *okpKey `json:"jwk,omitempty"`
}

// okpKey is an RFC 8037 Ed25519 public JWK.
type okpKey struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
}

// Issue signs a certificate for req.
func (a *Authority) Issue(req CertRequest) (*Certificate, error) {
	if err := protocol.ValidateAgentID(req.AgentID); err != nil {
		return nil, fmt.Errorf("authority: certificate request: %w", err)
	}
	jwk, err := peerJWK(req.Peer)
	if err != nil {
		return nil, fmt.Errorf("authority: certificate request for %s: %w", req.AgentID, err)
	}
	ttl, err := checkTTL("TTL", req.TTL, DefaultCertTTL, MaxCertTTL)
	if err != nil {
		return nil, fmt.Errorf("authority: certificate request for %s: %w", req.AgentID, err)
	}
	jti, err := a.newID()
	if err != nil {
		return nil, err
	}
	now := a.now().UTC().Truncate(time.Second)
	since := req.HeldSince.UTC().Truncate(time.Second)
	if since.IsZero() || since.After(now) {
		since = now
	}
	c := &Certificate{
		ID: jti, Issuer: a.id, AgentID: req.AgentID, Namespace: namespace(req.AgentID), Peer: req.Peer,
		Capabilities: nonNil(req.Capabilities), Permissions: nonNil(req.Permissions),
		IssuedAt: now, NotBefore: now, Expires: now.Add(ttl), HeldSince: since,
	}
	claims := &certClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: c.Issuer, Subject: c.AgentID, ID: c.ID,
			IssuedAt: jwt.NewNumericDate(c.IssuedAt), NotBefore: jwt.NewNumericDate(c.NotBefore), ExpiresAt: jwt.NewNumericDate(c.Expires),
		},
		Namespace: c.Namespace, Capabilities: c.Capabilities, Permissions: c.Permissions,
		Cnf: &confirmation{JWK: jwk},
	}
	if since.Before(now) {
		claims.HeldSince = jwt.NewNumericDate(since)
	}
	if c.Raw, err = a.sign(typCert, claims); err != nil {
		return nil, err
	}
	if len(c.Raw) > MaxCertBytes {
		return nil, fmt.Errorf("authority: certificate for %s would be %d bytes, more than MaxCertBytes (%d): fewer capabilities or permissions",
			req.AgentID, len(c.Raw), MaxCertBytes)
	}
	return c, nil
}

// peerJWK returns the JWK of an Ed25519 peer id's key.
func peerJWK(p peer.ID) (*okpKey, error) {
	if p == "" {
		return nil, errors.New("no peer id")
	}
	pub, err := p.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("peer id %s does not embed its public key: %w", p, err)
	}
	if pub.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("peer id %s has a %s key; certificates bind Ed25519 keys", p, pub.Type())
	}
	raw, err := pub.Raw()
	if err != nil {
		return nil, err
	}
	return &okpKey{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(raw)}, nil
}

// peerOf returns the peer id of a cnf JWK, refusing anything but an Ed25519 OKP key.
func peerOf(k *okpKey) (peer.ID, error) {
	if k == nil {
		return "", errors.New("no cnf.jwk claim")
	}
	if k.Kty != "OKP" || k.Crv != "Ed25519" {
		return "", fmt.Errorf("cnf.jwk is kty %q crv %q, want OKP Ed25519", k.Kty, k.Crv)
	}
	raw, err := b64.DecodeString(k.X)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return "", fmt.Errorf("cnf.jwk.x is not a base64url 32-byte Ed25519 key")
	}
	pub, err := crypto.UnmarshalEd25519PublicKey(raw)
	if err != nil {
		return "", fmt.Errorf("cnf.jwk.x: %w", err)
	}
	return peer.IDFromPublicKey(pub)
}

// checkTTL applies a default to a zero ttl and refuses a negative or too long one.
func checkTTL(field string, ttl, def, limit time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return def, nil
	case ttl < time.Second || ttl > limit:
		return 0, fmt.Errorf("%s %v is out of range: from 1s to %v (0 means %v)", field, ttl, limit, def)
	}
	return ttl, nil
}

// nonNil returns a copy of s, empty rather than nil, so that the claim is [] rather than null.
func nonNil(s []string) []string {
	return append(make([]string, 0, len(s)), s...)
}
