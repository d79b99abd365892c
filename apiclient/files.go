package apiclient

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/iacp-node/iacp-node/internal/fsutil"
)

// The API's files in a node's data directory.
const (
	// TokenFile holds the bearer token, mode 0600.
	TokenFile = "api.token"
	// AddrFile holds the address the running server listens on (host:port); it exists only
	// while a server runs.
	AddrFile = "api.addr"
)

// ReadToken returns the token in <dataDir>/api.token. A token file readable by group or
// others is refused: fix it with chmod 600.
func ReadToken(dataDir string) (string, error) {
	return ReadTokenFile(filepath.Join(dataDir, TokenFile))
}

// ReadTokenFile reads the token file at path, as ReadToken does.
func ReadTokenFile(path string) (string, error) {
	if err := fsutil.CheckPrivate(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("api token: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("api token %s is empty: delete it and restart the node to create a new one", path)
	}
	return tok, nil
}

// ReadAddr returns the address in <dataDir>/api.addr, written by a running server.
func ReadAddr(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, AddrFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
