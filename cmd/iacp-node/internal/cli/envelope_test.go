package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// unsignedDoc is what an agent hands to `envelope sign`: the node fills id, version, sender.
// The timestamp is fixed so that verification can be run at a fixed --at.
const unsignedDoc = `envelope:
  recipient:
    agent_id: acme:host-2:analyst
  timestamp: "2026-05-01T12:00:00.000Z"
  ttl_seconds: 600
  x-trace: abc
message:
  type: request
  intent: query
  payload:
    question: "Grüße: what is 1.50 + 1e21?"
    price: 1.50
`

const verifyAt = "2026-05-01T12:01:00Z"

// signed writes a key and a signed JSON document into a temporary directory.
func signed(t *testing.T) (dir, docPath string) {
	t.Helper()
	dir = t.TempDir()
	key := filepath.Join(dir, "node.key")
	if code, _, errOut := run(t, "", "keygen", "--out", key); code != 0 {
		t.Fatalf("keygen: %s", errOut)
	}
	code, out, errOut := run(t, unsignedDoc, "envelope", "sign", "--key", key, "--agent-id", "acme:host-1:planner", "--to", "json")
	if code != 0 {
		t.Fatalf("sign: exit %d: %s", code, errOut)
	}
	m, err := protocol.DecodeJSON([]byte(out))
	if err != nil {
		t.Fatalf("sign wrote %q: %v", out, err)
	}
	if m.Envelope.Sender.IdentitySig == "" || m.Envelope.Sender.AgentID != "acme:host-1:planner" || m.Envelope.MessageID == "" ||
		m.Envelope.CorrelationID != m.Envelope.MessageID || m.Envelope.Recipient.Channel != protocol.ChannelQuery {
		t.Fatalf("sign did not fill the envelope: %s", out)
	}
	docPath = filepath.Join(dir, "msg.json")
	if err := os.WriteFile(docPath, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, docPath
}

func verify(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code, out, _ := run(t, "", append([]string{"envelope", "verify", "--at", verifyAt}, args...)...)
	return code, out
}

func TestEnvelope_SignThenVerify_Exit0WithOneLineVerdict(t *testing.T) {
	defer noLeaks(t)()
	_, doc := signed(t)
	code, out := verify(t, doc)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if !strings.HasPrefix(out, "VALID ") || strings.Count(out, "\n") != 1 || !strings.Contains(out, "request/query from acme:host-1:planner") {
		t.Fatalf("verdict %q", out)
	}
	// The same from standard input.
	b, _ := os.ReadFile(doc)
	if code, out, _ := run(t, string(b), "envelope", "verify", "--at", verifyAt); code != 0 || !strings.HasPrefix(out, "VALID ") {
		t.Fatalf("stdin: exit %d %q", code, out)
	}
}

func TestEnvelope_Tampered_Exit2WithCode(t *testing.T) {
	defer noLeaks(t)()
	dir, doc := signed(t)
	b, _ := os.ReadFile(doc)
	tampered := strings.Replace(string(b), "what is", "what was", 1)
	if tampered == string(b) {
		t.Fatal("tampering changed nothing")
	}
	path := filepath.Join(dir, "tampered.json")
	if err := os.WriteFile(path, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := verify(t, path)
	if code != 2 || !strings.HasPrefix(out, "INVALID IDENTITY_INVALID: ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("exit %d, verdict %q", code, out)
	}
}

func TestEnvelope_Expired_Exit2WithTimeout(t *testing.T) {
	_, doc := signed(t)
	code, out, _ := run(t, "", "envelope", "verify", "--at", "2026-05-01T12:10:00Z", doc)
	if code != 2 || !strings.HasPrefix(out, "INVALID TIMEOUT: ") {
		t.Fatalf("exit %d, verdict %q", code, out)
	}
}

func TestEnvelope_Malformed_Exit2WithPayloadInvalid(t *testing.T) {
	code, out, _ := run(t, `{"envelope":{"version":"1.0","version":"2.0"}}`, "envelope", "verify")
	if code != 2 || !strings.HasPrefix(out, "INVALID PAYLOAD_INVALID: ") {
		t.Fatalf("exit %d, verdict %q", code, out)
	}
}

func TestEnvelope_FmtJSONToYAMLAndBack_KeepsSignatureValid(t *testing.T) {
	defer noLeaks(t)()
	dir, doc := signed(t)
	code, y, errOut := run(t, "", "envelope", "fmt", "--to", "yaml", doc)
	if code != 0 || protocol.DetectFormat([]byte(y)) != protocol.YAML || !strings.Contains(y, "x-trace: abc") {
		t.Fatalf("fmt --to yaml: exit %d %s\n%s", code, errOut, y)
	}
	yPath := filepath.Join(dir, "msg.yaml")
	if err := os.WriteFile(yPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := verify(t, yPath); code != 0 {
		t.Fatalf("YAML does not verify: %s", out)
	}
	code, j, errOut := run(t, y, "envelope", "fmt", "--to", "json")
	if code != 0 || protocol.DetectFormat([]byte(j)) != protocol.JSON {
		t.Fatalf("fmt --to json: exit %d %s", code, errOut)
	}
	jPath := filepath.Join(dir, "back.json")
	if err := os.WriteFile(jPath, []byte(j), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := verify(t, jPath); code != 0 {
		t.Fatalf("JSON from YAML does not verify: %s", out)
	}
}

func TestEnvelope_Sign_NeedsAKeyThatExists(t *testing.T) {
	code, _, errOut := run(t, unsignedDoc, "envelope", "sign", "--key", filepath.Join(t.TempDir(), "missing.key"), "--agent-id", "a:b:c")
	if code != 1 || !strings.Contains(errOut, "missing.key") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// translate carries an ElizaOS TASK_REQUEST into IACP and back unchanged, refuses what the
// target cannot express with the reason, and needs --to.
func TestEnvelopeTranslate_RoundTripAndRefusal(t *testing.T) {
	src, err := os.ReadFile("../../../../dialect/testdata/elizaos/s4.1-task-request.json")
	if err != nil {
		t.Fatal(err)
	}
	code, iacp, errOut := run(t, string(src), "envelope", "translate", "--to", "iacp")
	if code != 0 || !strings.Contains(iacp, `"intent":"handoff"`) || !strings.Contains(iacp, `"x-dialect"`) {
		t.Fatalf("to iacp: exit %d, %s %s", code, iacp, errOut)
	}
	code, back, errOut := run(t, iacp, "envelope", "translate", "--to", "elizaos")
	if code != 0 {
		t.Fatalf("back to elizaos: exit %d, %s", code, errOut)
	}
	a, err := protocol.CanonicalJSON([]byte(back))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := protocol.CanonicalJSON(src)
	if !bytes.Equal(a, b) {
		t.Fatalf("the round trip changed the document:\n%s\n%s", a, b)
	}
	// An event has no ElizaOS performative.
	ev, err := os.ReadFile("../../../../dialect/testdata/iacp-1.0/s3.3-event-notification.json")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, string(ev), "envelope", "translate", "--to", "elizaos"); code == 0 || !strings.Contains(errOut, "CAPABILITY_MISMATCH: cannot be expressed in elizaos") {
		t.Fatalf("an event to elizaos: exit %d, %s", code, errOut)
	}
	if code, _, errOut := run(t, string(src), "envelope", "translate"); code == 0 || !strings.Contains(errOut, `"to" not set`) {
		t.Fatalf("without --to: exit %d, %s", code, errOut)
	}
}

// An ACP v2 AgentCommand names its sender in from, not sender.agent_id: translated to another
// draft without --sender, the sender is still the command's own.
func TestEnvelopeTranslate_ACPv2SenderFromFrom(t *testing.T) {
	src, err := os.ReadFile("../../../../dialect/testdata/acp-v2/structure-1-agent-command.json")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, string(src), "envelope", "translate", "--to", "elizaos")
	if code != 0 || !strings.Contains(out, `"sender":{"agent_id":"orchestrator"}`) {
		t.Fatalf("acp-v2 to elizaos: exit %d, %s %s", code, out, errOut)
	}
}
