package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A scribbled page in store.db ended the process with a bbolt assertion panic. The
// node refuses to start with an error that names the file and the recovery commands, and
// `iacp-node store recover` keeps every readable message, so the node starts again with them.
func TestDamage_ScribbledStoreIsAClearErrorAndRecovers(t *testing.T) {
	a := newProc(t, "a", "e2e:lab:alice")
	a.start()
	const queued = 300
	var ids []string
	for i := 0; i < queued; i++ { // for an agent nobody serves: they stay in the outbox
		id, err := a.send("e2e:lab:nobody", 3600, i)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	a.stop()
	// Scribble over the pages that hold queued messages: every page with a copy of the 150th
	// message's record (bbolt leaves older copies on free pages; the live one is among them).
	db := filepath.Join(a.dir, "store", "store.db")
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	rec := []byte(`{"id":"` + ids[queued/2] + `"`)
	copies := 0
	for from := 0; ; {
		at := bytes.Index(raw[from:], rec)
		if at < 0 {
			break
		}
		at += from
		copy(raw[at/page*page:], bytes.Repeat([]byte("\xde\xad\xbe\xef"), page/4))
		copies++
		from = at/page*page + page
	}
	if copies == 0 {
		t.Fatal("no record of the 150th message in store.db")
	}
	if err := os.WriteFile(db, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "run", "--data-dir", a.dir, "--listen", a.addr(), "--nat=false",
		"--api", a.url("")[len("http://"):]).CombinedOutput()
	if err == nil || strings.Contains(string(out), "panic") || !strings.Contains(string(out), "store.db") ||
		!strings.Contains(string(out), "iacp-node store recover") {
		t.Fatalf("run on a damaged store: %v\n%s\nwant a clear error naming the file and `iacp-node store recover`, not a panic", err, out)
	}
	out, err = exec.CommandContext(ctx, binary, "store", "recover", "--data-dir", a.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("store recover: %v\n%s", err, out)
	}
	t.Logf("store recover:\n%s", out)
	a.start()
	deadline := time.Now().Add(10 * time.Second)
	for a.outboxLen() < queued-50 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := a.outboxLen(); n < queued-50 {
		t.Fatalf("after recovery the outbox holds %d of the %d queued messages; one damaged page holds far fewer", n, queued)
	}
}
