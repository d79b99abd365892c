package authority

import (
	"crypto/sha256"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// CertCache remembers certificates whose signature and form verified, by hash of the mesh
// and the raw certificate, so that the Verifiers sharing it check a certificate's signature
// once, not once each. A process that hosts many nodes (the simulator) gives them one: each
// node checks each agent's certificate on first hearing the agent, N x N checks of N
// certificates. The Certificates made from a hit share the cached raw text, so that the nodes
// hold one copy of each certificate rather than one each. Only what verified is kept, and a
// hit still runs every check that depends on the Verifier or the time (issuer, validity,
// subject, holder, revocation). A node alone in its process keeps the certificates it
// verified anyway, so a Verifier has none unless its owner passes one in (WithCertCache).
type CertCache struct {
	c    *lru.Cache[[sha256.Size]byte, cachedCert]
	hits atomic.Uint64
}

// cachedCert is a certificate that verified: its claims, and its raw text, which every
// Certificate made from a hit shares (so that N nodes hold one copy of it, not N).
type cachedCert struct {
	raw    string
	claims certClaims
}

// NewCertCache returns a cache of up to n certificates; n <= 0 returns nil, no cache.
func NewCertCache(n int) *CertCache {
	if n <= 0 {
		return nil
	}
	c, _ := lru.New[[sha256.Size]byte, cachedCert](n) // fails only for a size < 1
	return &CertCache{c: c}
}

// Hits returns how many certificates the cache answered without a signature check; 0 for a
// nil cache.
func (c *CertCache) Hits() uint64 {
	if c == nil {
		return 0
	}
	return c.hits.Load()
}

// Len returns how many certificates the cache holds; 0 for a nil cache.
func (c *CertCache) Len() int {
	if c == nil {
		return 0
	}
	return c.c.Len()
}

// WithCertCache has the Verifier look certificates up in c before it verifies their
// signature, and keep there those that verified. nil: none (the default).
func WithCertCache(c *CertCache) VerifierOption {
	return func(cfg *verifierConfig) { cfg.certs = c }
}

// certKey is the cache key of raw verified for the mesh meshID: a mesh's hit is never
// another's.
func certKey(meshID, raw string) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(meshID))
	h.Write([]byte{0})
	h.Write([]byte(raw))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// get returns the raw text and the claims of raw if they verified for meshID before.
func (c *CertCache) get(meshID, raw string) (string, certClaims, bool) {
	if c == nil {
		return raw, certClaims{}, false
	}
	e, ok := c.c.Get(certKey(meshID, raw))
	if !ok {
		return raw, certClaims{}, false
	}
	c.hits.Add(1)
	return e.raw, e.claims, true
}

// add keeps the claims of raw, which verified for meshID. The claims are shared: no one
// changes them after the parse.
func (c *CertCache) add(meshID, raw string, claims certClaims) {
	if c != nil {
		c.c.Add(certKey(meshID, raw), cachedCert{raw: raw, claims: claims})
	}
}
