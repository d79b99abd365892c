package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
)

func writeAuditLog(t *testing.T, dataDir string, n int) {
	t.Helper()
	l, err := audit.Open(filepath.Join(dataDir, "audit"), audit.WithMaxFileBytes(4096))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		e := audit.Entry{Event: audit.EventSent, MessageID: "0190a000-0000-7000-8000-000000000001",
			From: "a:h:alice", To: "a:h:bob", Payload: []byte(`{"text":"` + strings.Repeat("x", 100) + `"}`)}
		if i%10 == 0 {
			e.Event, e.Code = audit.EventRefused, protocol.CodeRateLimited
		}
		if err := l.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func runAuditCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAuditVerify(t *testing.T) {
	dd := t.TempDir()
	writeAuditLog(t, dd, 50)
	code, out, errOut := runAuditCLI("audit", "verify", "--data-dir", dd)
	if code != 0 || !strings.HasPrefix(out, "ok: 50 entries in ") || !strings.Contains(out, "files, chain intact\n") {
		t.Fatalf("verify intact: exit %d, %q %q", code, out, errOut)
	}
	// Change one line of the first file: exit 2, naming the next line.
	path := filepath.Join(dd, "audit", "audit-000001.jsonl")
	b, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[2] = bytes.Replace(lines[2], []byte("a:h:bob"), []byte("a:h:eve"), 1)
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runAuditCLI("audit", "verify", "--data-dir", dd)
	if code != 2 || !strings.Contains(out, "BROKEN: "+path+" line 4:") {
		t.Fatalf("verify tampered: exit %d, %q", code, out)
	}
	t.Setenv("IACP_DATA_DIR", filepath.Join(dd, "nowhere"))
	if code, _, errOut := runAuditCLI("audit", "verify"); code != 1 || !strings.Contains(errOut, "no audit log at") {
		t.Fatalf("verify without a log: exit %d, %q", code, errOut)
	}
}

func TestAuditTail(t *testing.T) {
	dd := t.TempDir()
	writeAuditLog(t, dd, 50)
	code, out, errOut := runAuditCLI("audit", "tail", "-n", "5", "-o", "json", "--data-dir", dd)
	if code != 0 {
		t.Fatalf("tail: exit %d %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("tail -n 5 printed %d lines: %q", len(lines), out)
	}
	var e audit.Entry
	if err := json.Unmarshal([]byte(lines[4]), &e); err != nil || e.Seq != 50 || e.Code != protocol.CodeRateLimited {
		t.Fatalf("last json line: %+v %v", e, err)
	}
	t.Setenv("IACP_DATA_DIR", dd)
	code, out, _ = runAuditCLI("audit", "tail", "--from", "48")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(rows) != 4 || !strings.HasPrefix(rows[0], "SEQ") || !strings.HasPrefix(rows[3], "50 ") ||
		!strings.Contains(rows[3], "refused") || !strings.Contains(rows[3], "RATE_LIMITED") {
		t.Fatalf("tail --from 48 table: exit %d %q", code, out)
	}
	if code, _, errOut := runAuditCLI("audit", "tail", "-o", "xml"); code != 1 || !strings.Contains(errOut, "use json or table") {
		t.Fatalf("bad -o: %d %q", code, errOut)
	}
	if code, out, _ := runAuditCLI("audit", "tail", "--help"); code != 0 || !strings.Contains(out, "--follow") {
		t.Fatalf("tail --help: %d %q", code, out)
	}
	if code, out, _ := runAuditCLI("audit", "verify", "--help"); code != 0 || !strings.Contains(out, "chain intact") {
		t.Fatalf("verify --help: %d %q", code, out)
	}
}
