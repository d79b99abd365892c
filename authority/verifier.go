package authority

import (
	"crypto/ed25519"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// DefaultSkew is the clock difference Verifiers tolerate by default: the drafts' 30 s.
const DefaultSkew = 30 * time.Second

// Verifier checks what a mesh authority signed: certificates, revocation lists and tokens. It
// needs only the authority's public key. It is safe for concurrent use; mu guards the
// revocation state, everything else is fixed at construction.
type Verifier struct {
	meshKey ed25519.PublicKey // nil when the mesh key is not Ed25519: nothing verifies
	meshID  string
	issuers map[string]ed25519.PublicKey // trusted token issuers by iss; nil value: not Ed25519
	now     func() time.Time
	skew    time.Duration

	tokens *lru.Cache[[sha256.Size]byte, verifiedToken] // tokens that passed, by hash of the raw
	certs  *CertCache                                   // certificates that verified (shared); nil: none

	mu      sync.RWMutex
	crlRaw  string              // the revocation list last applied
	crlSeq  uint64              // its seq
	revoked map[string]struct{} // the jti of its entries
}

// verifierConfig is what VerifierOptions set.
type verifierConfig struct {
	now     func() time.Time
	skew    time.Duration
	issuers map[string]crypto.PubKey
	certs   *CertCache
}

// VerifierOption configures a Verifier.
type VerifierOption func(*verifierConfig)

// WithVerifierClock sets the Verifier's clock (default time.Now); nil keeps the default.
func WithVerifierClock(now func() time.Time) VerifierOption {
	return func(c *verifierConfig) {
		if now != nil {
			c.now = now
		}
	}
}

// WithSkew sets the tolerated clock difference (default DefaultSkew); a negative one is 0.
func WithSkew(d time.Duration) VerifierOption {
	return func(c *verifierConfig) { c.skew = max(d, 0) }
}

// WithTrustedIssuer trusts key to sign A2ACP tokens whose "iss" is id, besides the mesh
// authority. It is for tokens only: certificates and revocation lists are the mesh
// authority's alone. The mesh id cannot be given to another key, and a key that is not
// Ed25519 verifies nothing (its tokens fail rule 1).
func WithTrustedIssuer(id string, key crypto.PubKey) VerifierOption {
	return func(c *verifierConfig) {
		if id != "" {
			c.issuers[id] = key
		}
	}
}

// NewVerifier returns a Verifier for the mesh whose authority key is mesh. A nil or
// non-Ed25519 key makes a Verifier that refuses every certificate and revocation list.
func NewVerifier(mesh crypto.PubKey, opts ...VerifierOption) *Verifier {
	cfg := verifierConfig{now: time.Now, skew: DefaultSkew, issuers: map[string]crypto.PubKey{}}
	for _, o := range opts {
		o(&cfg)
	}
	tokens, _ := lru.New[[sha256.Size]byte, verifiedToken](TokenCacheSize) // fails only for a size < 1
	v := &Verifier{now: cfg.now, skew: cfg.skew, issuers: map[string]ed25519.PublicKey{}, revoked: map[string]struct{}{}, tokens: tokens, certs: cfg.certs}
	v.meshKey = edKey(mesh)
	if v.meshKey != nil {
		if id, err := peer.IDFromPublicKey(mesh); err == nil {
			v.meshID = id.String()
		} else {
			v.meshKey = nil
		}
	}
	for id, k := range cfg.issuers {
		if id != v.meshID {
			v.issuers[id] = edKey(k)
		}
	}
	return v
}

// edKey returns the Ed25519 key of k, or nil.
func edKey(k crypto.PubKey) ed25519.PublicKey {
	if k == nil || k.Type() != crypto.Ed25519 {
		return nil
	}
	raw, err := k.Raw()
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil
	}
	return ed25519.PublicKey(raw)
}

// MeshID returns the mesh id: the peer id of the mesh authority key ("" if it is unusable).
func (v *Verifier) MeshID() string { return v.meshID }

// meshKeyFor returns the mesh key for verifyJWS.
func (v *Verifier) meshKeyFor() (ed25519.PublicKey, error) {
	if v.meshKey == nil {
		return nil, &keyError{"this verifier has no Ed25519 mesh authority key"}
	}
	return v.meshKey, nil
}

// certCheckOf is the certificate check that a failed stage of verifyJWS is reported as.
var certCheckOf = map[stage]Check{stageParse: CheckParse, stageAlg: CheckAlg, stageTyp: CheckType, stageKey: CheckSignature, stageSignature: CheckSignature}

// certTimes checks a certificate's iat, nbf, exp and held_since against the verifier's clock
// and skew, and returns them.
func (v *Verifier) certTimes(c *certClaims, who string) (iat, nbf, exp, since time.Time, err error) {
	iat, okI := timeOf(c.IssuedAt)
	nbf, okN := timeOf(c.NotBefore)
	exp, _ = timeOf(c.ExpiresAt)
	if !okI || !okN {
		return iat, nbf, exp, since, certError(who, CheckNotBefore, "iat and nbf are required")
	}
	if err := v.inWindow(iat, nbf, exp, who); err != nil {
		return iat, nbf, exp, since, err
	}
	since = iat
	if c.HeldSince != nil {
		if since = c.HeldSince.Time; since.After(iat) {
			return iat, nbf, exp, since, certError(who, CheckNotBefore, "held_since %s is after iat %s", fmtTime(since), fmtTime(iat))
		}
	}
	return iat, nbf, exp, since, nil
}

// inWindow checks that a certificate issued at iat, valid from nbf until exp (zero: missing),
// is valid now, within the skew.
func (v *Verifier) inWindow(iat, nbf, exp time.Time, who string) error {
	now := v.now()
	switch {
	case nbf.After(now.Add(v.skew)):
		return certError(who, CheckNotBefore, "valid from %s (now %s, skew %v)", fmtTime(nbf), fmtTime(now), v.skew)
	case iat.After(now.Add(v.skew)):
		return certError(who, CheckNotBefore, "issued at %s, in the future (now %s, skew %v)", fmtTime(iat), fmtTime(now), v.skew)
	case exp.IsZero():
		return certError(who, CheckExpiry, "exp is required")
	case !exp.After(now.Add(-v.skew)):
		return certError(who, CheckExpiry, "expired at %s (now %s, skew %v)", fmtTime(exp), fmtTime(now), v.skew)
	}
	return nil
}

// Certificate verifies the certificate raw for agent agentID on peer p. An empty agentID or p
// skips that comparison (the certificate is still checked for a well-formed sub and cnf).
// The checks run in the order of the Check constants; the first failure is returned as a
// *CertError naming it, with CodeIdentityInvalid.
func (v *Verifier) Certificate(raw string, p peer.ID, agentID string) (*Certificate, error) {
	if len(raw) > MaxCertBytes {
		return nil, certError(agentID, CheckSize, "%d bytes, more than %d", len(raw), MaxCertBytes)
	}
	if c, ok := v.certs.get(v.meshID, raw); ok {
		if err := v.recheck(c, p, agentID); err != nil {
			return nil, err
		}
		return c, nil
	}
	var c certClaims
	if err := verifyJWS(raw, &c, exactTyp(typCert), v.meshKeyFor); err != nil {
		who := agentID
		if who == "" && err.stage > stageParse {
			who = c.Subject
		}
		check := certCheckOf[err.stage]
		if err.stage == stageSignature {
			err.msg = "not signed by the mesh authority " + v.meshID
		}
		return nil, certError(who, check, "%s", err.msg)
	}
	who := agentID
	if who == "" {
		who = c.Subject
	}
	if c.Issuer != v.meshID {
		return nil, certError(who, CheckIssuer, "iss %q is not the mesh id %s", c.Issuer, v.meshID)
	}
	iat, nbf, exp, since, err := v.certTimes(&c, who)
	if err != nil {
		return nil, err
	}
	if err := protocol.ValidateAgentID(c.Subject); err != nil {
		return nil, certError(who, CheckSubject, "sub: %v", err)
	}
	if agentID != "" && c.Subject != agentID {
		return nil, certError(who, CheckSubject, "issued to %q", c.Subject)
	}
	if c.Namespace != namespace(c.Subject) {
		return nil, certError(who, CheckSubject, "ns %q is not the namespace of %q", c.Namespace, c.Subject)
	}
	var jwk *okpKey
	if c.Cnf != nil {
		jwk = c.Cnf.JWK
	}
	holder, err := peerOf(jwk)
	if err != nil {
		return nil, certError(who, CheckConfirmation, "%v", err)
	}
	if p != "" && holder != p {
		return nil, certError(who, CheckConfirmation, "bound to peer %s, not %s", holder, p)
	}
	if c.ID == "" {
		return nil, certError(who, CheckRevoked, "no jti, so it cannot be revoked")
	}
	if v.Revoked(c.ID) {
		return nil, certError(who, CheckRevoked, "jti %s is on revocation list %d", c.ID, v.RevocationSeq())
	}
	cert := &Certificate{
		Raw: raw, ID: c.ID, Issuer: c.Issuer, AgentID: c.Subject, Namespace: c.Namespace, Peer: holder,
		Capabilities: slices.Clone(c.Capabilities), Permissions: slices.Clone(c.Permissions),
		IssuedAt: iat, NotBefore: nbf, Expires: exp, HeldSince: since,
	}
	v.certs.add(v.meshID, cert)
	return cert, nil
}

// recheck runs on c, a certificate that passed every check of this mesh's Verifiers before
// (it came from the CertCache), the checks whose outcome depends on the time or on the call:
// validity now, the agent and the peer asked for, and revocation. It reports them as
// Certificate does.
func (v *Verifier) recheck(c *Certificate, p peer.ID, agentID string) error {
	who := agentID
	if who == "" {
		who = c.AgentID
	}
	if err := v.inWindow(c.IssuedAt, c.NotBefore, c.Expires, who); err != nil {
		return err
	}
	if agentID != "" && c.AgentID != agentID {
		return certError(who, CheckSubject, "issued to %q", c.AgentID)
	}
	if p != "" && c.Peer != p {
		return certError(who, CheckConfirmation, "bound to peer %s, not %s", c.Peer, p)
	}
	if v.Revoked(c.ID) {
		return certError(who, CheckRevoked, "jti %s is on revocation list %d", c.ID, v.RevocationSeq())
	}
	return nil
}
