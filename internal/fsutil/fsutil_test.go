package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplacesAtomicallyWithThePermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "two" {
		t.Fatalf("read %q, %v", b, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestCheckPrivateRefusesAFileOthersCanRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "identity.key")
	if err := os.WriteFile(path, []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := CheckPrivate(path)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("CheckPrivate = %v, want a refusal that names chmod 600", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(path); err != nil {
		t.Fatal(err)
	}
}

func TestCreateFileRefusesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "identity.key")
	if err := CreateFile(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := CreateFile(path, []byte("second"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateFile over an existing file = %v, want fs.ErrExist", err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "first" {
		t.Fatalf("the existing file was changed: %q", b)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
	if err := CheckPrivate(path); err != nil {
		t.Fatal(err)
	}
}
