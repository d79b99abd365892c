package authority

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/identity"
)

// Authority signs certificates, revocation lists and tokens with the mesh authority key. It
// holds no mutable state and is safe for concurrent use.
type Authority struct {
	key    crypto.PrivKey
	signer ed25519.PrivateKey
	id     string
	now    func() time.Time
	rand   io.Reader
}

// config is what Options set.
type config struct {
	now  func() time.Time
	rand io.Reader
}

// Option configures an Authority.
type Option func(*config) error

// WithClock sets the clock that stamps iat, nbf and exp (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("authority: WithClock: nil clock")
		}
		c.now = now
		return nil
	}
}

// withRandom sets the source of certificate and token ids (default crypto/rand), so that the
// test vectors are reproducible.
func withRandom(r io.Reader) Option {
	return func(c *config) error {
		c.rand = r
		return nil
	}
}

// New returns an Authority that signs with key, which must be Ed25519.
func New(key crypto.PrivKey, opts ...Option) (*Authority, error) {
	if key == nil {
		return nil, errors.New("authority: no key")
	}
	if key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("authority: the key is %s; the mesh authority key must be Ed25519", key.Type())
	}
	cfg := config{now: time.Now, rand: rand.Reader}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	raw, err := key.Raw()
	if err != nil || len(raw) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("authority: unusable Ed25519 key (%d bytes): %v", len(raw), err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("authority: %w", err)
	}
	return &Authority{key: key, signer: ed25519.PrivateKey(raw), id: id.String(), now: cfg.now, rand: cfg.rand}, nil
}

// Generate returns an Authority with a new random key.
func Generate(opts ...Option) (*Authority, error) {
	key, err := identity.Generate()
	if err != nil {
		return nil, err
	}
	return New(key, opts...)
}

// Load reads the authority key file at path, in the format of identity key files (the libp2p
// protobuf encoding of an Ed25519 key), and refuses a file that others can read.
func Load(path string, opts ...Option) (*Authority, error) {
	key, err := identity.Load(path)
	if err != nil {
		return nil, fmt.Errorf("authority key: %w", err)
	}
	return New(key, opts...)
}

// Save writes the authority key to path with mode 0600, durably and atomically; it refuses to
// overwrite an existing file.
func (a *Authority) Save(path string) error { return identity.Save(path, a.key) }

// ID returns the mesh id: the peer id of the authority's public key, the "iss" of everything
// the authority signs.
func (a *Authority) ID() string { return a.id }

// PublicKey returns the authority's public key, which Verifiers need.
func (a *Authority) PublicKey() crypto.PubKey { return a.key.GetPublic() }

// newID returns a random 128-bit id, base64url without padding.
func (a *Authority) newID() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(a.rand, b[:]); err != nil {
		return "", fmt.Errorf("authority: random id: %w", err)
	}
	return b64.EncodeToString(b[:]), nil
}
