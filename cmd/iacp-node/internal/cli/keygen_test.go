package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/cmd/iacp-node/internal/cli"
	"github.com/iacp-node/iacp-node/identity"
)

// run calls the command line with args and stdin, and returns its exit code and output.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestKeygen_WritesMode0600AndPrintsPeerID(t *testing.T) {
	defer noLeaks(t)()
	path := filepath.Join(t.TempDir(), "keys", "node.key")
	code, out, errOut := run(t, "", "keygen", "--out", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", st.Mode().Perm())
	}
	key, err := identity.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := identity.PeerID(key).String() + "\n"; out != want {
		t.Fatalf("stdout %q, want the peer id %q", out, want)
	}
	if !strings.HasPrefix(out, "12D3KooW") {
		t.Fatalf("%q is not an Ed25519 peer id", out)
	}
}

func TestKeygen_RefusesToOverwrite(t *testing.T) {
	defer noLeaks(t)()
	path := filepath.Join(t.TempDir(), "node.key")
	if code, _, errOut := run(t, "", "keygen", "--out", path); code != 0 {
		t.Fatalf("first keygen: exit %d: %s", code, errOut)
	}
	before, _ := os.ReadFile(path)
	code, out, errOut := run(t, "", "keygen", "--out", path)
	if code == 0 || out != "" {
		t.Fatalf("second keygen: exit %d, stdout %q", code, out)
	}
	if !strings.Contains(errOut, "already exists") {
		t.Fatalf("stderr %q does not say why", errOut)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the key file was changed")
	}
}

func TestKeygen_RequiresOut(t *testing.T) {
	if code, _, errOut := run(t, "", "keygen"); code == 0 || !strings.Contains(errOut, "out") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
