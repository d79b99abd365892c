package authority

import (
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// CertCache remembers the certificates that passed every check of a Verifier, by mesh and raw
// certificate, so that the Verifiers sharing it check a certificate's signature and form once,
// not once each. A process that hosts many nodes (the simulator) gives them one: each node
// checks each agent's certificate on first hearing the agent, N x N checks of N certificates. A
// hit returns the Certificate the first check made, so that the nodes hold one copy of each
// certificate rather than one each, and it still runs every check that depends on the time or
// on the call (validity, subject, holder, revocation). A node alone in its process keeps the
// certificates it verified anyway, so a Verifier has none unless its owner passes one in
// (WithCertCache).
type CertCache struct {
	c    *lru.Cache[certKey, *Certificate]
	hits atomic.Uint64
}

// NewCertCache returns a cache of up to n certificates; n <= 0 returns nil, no cache.
func NewCertCache(n int) *CertCache {
	if n <= 0 {
		return nil
	}
	c, _ := lru.New[certKey, *Certificate](n) // fails only for a size < 1
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
// another's. The key kept is the Certificate's own text, so that it costs no copy; a lookup
// hashes its text and allocates nothing.
type certKey struct{ meshID, raw string }

// get returns the certificate whose text is raw if it passed every check for meshID before.
func (c *CertCache) get(meshID, raw string) (*Certificate, bool) {
	if c == nil {
		return nil, false
	}
	cert, ok := c.c.Get(certKey{meshID, raw})
	if ok {
		c.hits.Add(1)
	}
	return cert, ok
}

// add keeps cert, which passed every check for meshID. It is shared: no one changes a
// Certificate after the Verifier made it.
func (c *CertCache) add(meshID string, cert *Certificate) {
	if c != nil {
		c.c.Add(certKey{meshID, cert.Raw}, cert)
	}
}
