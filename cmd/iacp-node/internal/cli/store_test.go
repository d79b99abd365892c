package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// writeStore puts n outbox messages into the store of data directory dd.
func writeStore(t *testing.T, dd string, n int) {
	t.Helper()
	s, err := store.Open(filepath.Join(dd, "store"), store.WithNoSync(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range n {
		m := &protocol.Message{
			Envelope: protocol.Envelope{Version: "1.0", MessageID: uuid.NewString(),
				Sender:    protocol.Sender{AgentID: "a:h:alice"},
				Recipient: protocol.Recipient{AgentID: "a:h:bob", Channel: "default"},
				Timestamp: time.Now().UTC().Format(time.RFC3339Nano), TTLSeconds: 3600},
			Message: protocol.Body{Type: "event", Intent: "notify", Payload: []byte(`{"text":"hello"}`)},
		}
		raw, err := protocol.EncodeJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
	}
}

// damageMeta overwrites the first meta page of the store file after its header.
func damageMeta(t *testing.T, dd string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dd, "store", store.FileName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(strings.Repeat("\xa5", 64)), 16); err != nil {
		t.Fatal(err)
	}
}

func TestStoreCheckAndRecover(t *testing.T) {
	dd := t.TempDir()
	writeStore(t, dd, 20)
	code, out, errOut := runAuditCLI("store", "check", "--data-dir", dd)
	if code != 0 || !strings.Contains(out, "outbox       20 records") || !strings.Contains(out, "ok: no damage found") {
		t.Fatalf("check intact: exit %d, %q %q", code, out, errOut)
	}
	damageMeta(t, dd)
	code, out, errOut = runAuditCLI("store", "check", "--data-dir", dd)
	if code != 2 || !strings.Contains(out, "DAMAGED: 1 problem") || !strings.Contains(out, "meta page 0") ||
		!strings.Contains(out, "iacp-node store recover --data-dir "+dd) || !strings.Contains(errOut, "is damaged") {
		t.Fatalf("check damaged: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = runAuditCLI("store", "recover", "--data-dir", dd)
	if code != 0 || !strings.Contains(out, "outbox     20 messages") || !strings.Contains(out, "could not read (1):") ||
		!strings.Contains(out, "damaged file kept as: "+filepath.Join(dd, "store", store.FileName+".damaged-")) {
		t.Fatalf("recover: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := runAuditCLI("store", "check", "--data-dir", dd); code != 0 || !strings.Contains(out, "outbox       20 records") {
		t.Fatalf("check after recover: exit %d, %q", code, out)
	}
}

func TestStoreRecoverNothingReadable(t *testing.T) {
	dd := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dd, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dd, "store", store.FileName), []byte(strings.Repeat("\xa5", 16384)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAuditCLI("store", "recover", "--data-dir", dd)
	if code != 2 || !strings.Contains(out, "outbox     0 messages") || !strings.Contains(errOut, "nothing could be recovered") {
		t.Fatalf("recover of junk: exit %d, %q %q", code, out, errOut)
	}
}

func TestStoreCommandsRefuseWhileANodeRuns(t *testing.T) {
	dd := t.TempDir()
	writeStore(t, dd, 1)
	s, err := store.Open(filepath.Join(dd, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if code, _, errOut := runAuditCLI("store", "check", "--data-dir", dd); code != 1 || !strings.Contains(errOut, "a node is running on this data directory; stop it first") {
		t.Fatalf("check while open: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runAuditCLI("store", "check", "--data-dir", filepath.Join(dd, "nowhere")); code != 1 || !strings.Contains(errOut, "no store at") {
		t.Fatalf("check without a store: exit %d, %q", code, errOut)
	}
}
