package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// crashEnv, when set in the environment, makes the test binary run crashChild instead of the
// tests: it is the directory the child writes to.
const crashEnv = "IACP_STORE_CRASH_DIR"

// crashChild puts messages from four writers with durability on and prints each message id
// on standard output right after its Put returned, until it is killed (or has put 2,000).
func crashChild() {
	s, err := Open(os.Getenv(crashEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex // one line per write(2), never interleaved
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 500 {
				m, raw, err := newMsg("a:h:r"+strconv.Itoa(w), time.Now(), 3600, 1024)
				if err == nil {
					err = s.Put(m, raw)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "child put:", err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintln(os.Stdout, m.Envelope.MessageID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}

// TestCrashAfterPut kills a writer with SIGKILL right after its k-th Put returned: after
// reopening, every message whose Put had returned (k, plus any reported before the kill
// landed) is there, intact.
func TestCrashAfterPut(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	const k = 60
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var acked []string
	for len(acked) < k && sc.Scan() {
		acked = append(acked, strings.TrimSpace(sc.Text()))
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatal(err)
	}
	for sc.Scan() { // lines written before the kill landed: those Puts returned too
		acked = append(acked, strings.TrimSpace(sc.Text()))
	}
	_ = cmd.Wait()
	if len(acked) < k {
		t.Fatalf("child reported only %d puts before it died", len(acked))
	}
	s := open(t, dir)
	for i, id := range acked {
		e, err := s.Get(id)
		if err != nil {
			t.Fatalf("put %d (%s) returned before the kill but is missing after reopen: %v", i+1, id, err)
		}
		if m, err := protocol.DecodeJSON(e.Raw); err != nil || m.Envelope.MessageID != id {
			t.Fatalf("entry %s does not hold its document: %v", id, err)
		}
	}
	l, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(l) < len(acked) {
		t.Fatalf("list has %d entries, fewer than the %d acknowledged", len(l), len(acked))
	}
	var total int64
	for _, e := range l {
		got, _ := s.Get(e.MessageID)
		total += got.Size()
	}
	if u := s.Usage(); u.OutboxBytes != total {
		t.Fatalf("recomputed bytes %d, want %d", u.OutboxBytes, total)
	}
	t.Logf("killed after %d acknowledged puts; %d entries on disk", len(acked), len(l))
}
