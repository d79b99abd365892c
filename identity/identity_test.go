package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

func TestLoadOrCreate_CreatesOnceWithMode0600ThenReuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "identity.key")
	k1, created, err := LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v", created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	k2, created, err := LoadOrCreate(path)
	if err != nil || created || !k1.Equals(k2) {
		t.Fatalf("second call: created=%v err=%v same=%v", created, err, k1.Equals(k2))
	}
	if PeerID(k1) != PeerID(k2) {
		t.Fatal("peer id changed")
	}
}

func TestSave_RefusesToOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k")
	k, _ := Generate()
	if err := Save(path, k); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, k); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("second Save: %v", err)
	}
}

func TestLoad_RefusesNonEd25519AndGarbage(t *testing.T) {
	dir := t.TempDir()
	sk, _, err := crypto.GenerateSecp256k1Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := crypto.MarshalPrivateKey(sk)
	p := filepath.Join(dir, "secp")
	_ = os.WriteFile(p, b, 0o600)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "Ed25519") {
		t.Fatalf("secp256k1 key: %v", err)
	}
	g := filepath.Join(dir, "garbage")
	_ = os.WriteFile(g, []byte("not a key"), 0o600)
	if _, err := Load(g); err == nil {
		t.Fatal("garbage loaded as a key")
	}
}

// A key others can read is refused, like the API token; an empty key file (what an
// unsynced write could leave after a crash) is refused with what to do, not "not a key".
func TestLoad_RefusesAKeyOthersCanReadAndAnEmptyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "identity.key")
	if _, _, err := LoadOrCreate(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key: %v, want a refusal naming chmod 600", err)
	}
	empty := filepath.Join(dir, "empty.key")
	_ = os.WriteFile(empty, nil, 0o600)
	if _, err := Load(empty); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("an empty key: %v", err)
	}
}
