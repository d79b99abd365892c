package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
)

func writeAuditLog(t *testing.T, dataDir string, n int, opts ...audit.Option) {
	t.Helper()
	l, err := audit.Open(filepath.Join(dataDir, "audit"), append([]audit.Option{audit.WithMaxFileBytes(4096)}, opts...)...)
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

// editAuditLine changes line i (from 0) of an audit file, so that the line after it no longer
// chains.
func editAuditLine(t *testing.T, path string, i int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[i] = bytes.Replace(lines[i], []byte("a:h:bob"), []byte("a:h:eve"), 1)
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
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
	editAuditLine(t, path, 2)
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

// The node found a break at start and went on in a new segment: verify names the break,
// exits 2, and says where the new segment starts and that it is intact, with its head.
func TestAuditVerifyABrokenChainAndItsNewSegment(t *testing.T) {
	dd := t.TempDir()
	dir := filepath.Join(dd, "audit")
	writeAuditLog(t, dd, 5, audit.WithMaxFileBytes(audit.DefaultMaxFileBytes))
	damaged := filepath.Join(dir, "audit-000001.jsonl")
	editAuditLine(t, damaged, 1)
	l, err := audit.Open(dir)
	if err != nil {
		t.Fatalf("open a damaged log: %v", err)
	}
	if err := l.Append(audit.Entry{Event: audit.EventSent, MessageID: "0190a000-0000-7000-8000-000000000007"}); err != nil {
		t.Fatal(err)
	}
	_, head := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runAuditCLI("audit", "verify", "--data-dir", dd)
	want := []string{
		"BROKEN: " + damaged + " line 3: prev does not match the hash of line 2",
		"the 2 entries before it in 1 files are intact",
		"new segment: " + filepath.Join(dir, "audit-000002.jsonl") + " starts at seq 6; the node began it when it found: audit: chain broken at audit-000001.jsonl line 3",
		"segment intact: 2 entries, seq 6 to 7, head sha256 " + head + "\n",
	}
	if code != 2 || !containsInOrder(out, want) || strings.Contains(out, "ok:") {
		t.Fatalf("verify a broken chain with a new segment: exit %d\n%s\nwant, in order: %q", code, out, want)
	}

	// The damaged line put back: ok, and a note that the node once started a segment.
	editAuditLineBack(t, damaged, 1)
	code, out, _ = runAuditCLI("audit", "verify", "--data-dir", dd)
	if code != 0 || !containsInOrder(out, []string{"ok: 7 entries in 2 files, chain intact", "head: seq 7 sha256 " + head,
		"note: new segment: " + filepath.Join(dir, "audit-000002.jsonl") + " starts at seq 6; the node began it when it found"}) {
		t.Fatalf("verify after the repair: exit %d\n%s", code, out)
	}
}

func editAuditLineBack(t *testing.T, path string, i int) {
	t.Helper()
	b, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[i] = bytes.Replace(lines[i], []byte("a:h:eve"), []byte("a:h:bob"), 1)
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestAuditVerifyAfterRetention(t *testing.T) {
	dd := t.TempDir()
	dir := filepath.Join(dd, "audit")
	writeAuditLog(t, dd, 100, audit.WithMaxTotalBytes(3*4096))
	code, out, _ := runAuditCLI("audit", "verify", "--data-dir", dd)
	if code != 0 || !strings.HasPrefix(out, "ok: ") ||
		!regexp.MustCompile(`\nnote: the log starts at seq \d+; retention removed the older files \(recorded at audit-\d{6}\.jsonl line \d+, seq \d+\)\n`).MatchString(out) {
		t.Fatalf("verify after retention: exit %d\n%s", code, out)
	}
	// The oldest kept file removed by hand too: still ok, with a warning.
	ents, _ := os.ReadDir(dir)
	if err := os.Remove(filepath.Join(dir, ents[0].Name())); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runAuditCLI("audit", "verify", "--data-dir", dd)
	if code != 0 || !strings.HasPrefix(out, "ok: ") ||
		!regexp.MustCompile(`\nwarning: the log starts at seq \d+, but no retention entry records removing the files before it: they were removed by hand\n`).MatchString(out) {
		t.Fatalf("verify after a removal by hand: exit %d\n%s", code, out)
	}
}

// containsInOrder reports whether s holds each of parts, one after another.
func containsInOrder(s string, parts []string) bool {
	for _, p := range parts {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}
