// Package identity loads, creates and stores the Ed25519 key that is both a node's libp2p
// identity and the key that signs its IACP messages.
//
// A key file holds the libp2p protobuf encoding of the private key (crypto.MarshalPrivateKey),
// the format go-libp2p and kubo use. It is created with mode 0600, durably and atomically (a
// crash never leaves an empty key behind), and a key file that others can read is refused.
package identity

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/fsutil"
)

// Generate returns a new Ed25519 key.
func Generate() (crypto.PrivKey, error) {
	k, _, err := crypto.GenerateEd25519Key(nil)
	return k, err
}

// Load reads a key file. It refuses a file that anyone but its owner can read or write (the
// key is the agent's identity), an empty or damaged file, and keys that are not Ed25519: IACP
// signatures are Ed25519.
func Load(path string) (crypto.PrivKey, error) {
	if err := fsutil.CheckPrivate(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read key: %w", err)
		}
		return nil, fmt.Errorf("identity key: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("key file %s is empty (an interrupted write by an older version?): restore it from a backup, "+
			"or remove it to start as a new peer with a new identity", path)
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("key file %s is not a libp2p private key: %w", path, err)
	}
	if k.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("key file %s holds a %s key; IACP needs Ed25519", path, k.Type())
	}
	return k, nil
}

// Save writes key to path with mode 0600, durably and atomically, creating parent directories
// (mode 0700). It refuses to overwrite an existing file.
func Save(path string, key crypto.PrivKey) error {
	b, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := fsutil.CreateFile(path, b, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; refusing to overwrite a key", path)
		}
		return err
	}
	return nil
}

// LoadOrCreate loads the key at path, or creates and saves a new one when the file does not
// exist. created says which happened.
func LoadOrCreate(path string) (key crypto.PrivKey, created bool, err error) {
	key, err = Load(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	key, err = Generate()
	if err != nil {
		return nil, false, err
	}
	if err := Save(path, key); err != nil {
		return nil, false, err
	}
	return key, true, nil
}

// PeerID returns the peer id of key.
func PeerID(key crypto.PrivKey) peer.ID {
	id, _ := peer.IDFromPrivateKey(key)
	return id
}
