package api

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/fsutil"
)

// TokenFile and AddrFile are the API's files in the data directory (apiclient's).
const (
	// TokenFile holds the bearer token, mode 0600.
	TokenFile = apiclient.TokenFile
	// AddrFile holds the address the running server listens on (host:port); it exists only
	// while a server runs.
	AddrFile = apiclient.AddrFile
)

// LoadOrCreateToken returns the token in <dataDir>/api.token, creating the file (mode 0600,
// 32 random bytes, base64url) when it does not exist. A token file readable by group or others
// is refused: fix it with chmod 600.
func LoadOrCreateToken(dataDir string) (string, error) {
	if dataDir == "" {
		return "", errors.New("api token: no data directory given")
	}
	path := filepath.Join(dataDir, TokenFile)
	if tok, err := readToken(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	err := fsutil.CreateFile(path, []byte(tok+"\n"), 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readToken(path) // another process created it first
	}
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	return tok, nil
}

// ReadToken returns the token in <dataDir>/api.token without creating it.
func ReadToken(dataDir string) (string, error) { return apiclient.ReadToken(dataDir) }

func readToken(path string) (string, error) { return apiclient.ReadTokenFile(path) }

// ReadAddr returns the address in <dataDir>/api.addr, written by a running server.
func ReadAddr(dataDir string) (string, error) { return apiclient.ReadAddr(dataDir) }

func writeAddr(dataDir, addr string) error {
	return fsutil.WriteFile(filepath.Join(dataDir, AddrFile), []byte(addr+"\n"), 0o600)
}

// removeAddr removes api.addr if it still names addr (a newer server may have replaced it).
func removeAddr(dataDir, addr string) error {
	if got, err := ReadAddr(dataDir); err != nil || got != addr {
		return nil
	}
	err := os.Remove(filepath.Join(dataDir, AddrFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
