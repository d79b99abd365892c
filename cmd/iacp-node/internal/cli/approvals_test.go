package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// send --require-approval holds the message; approvals lists it; approve sends it; reject
// drops another and its sender gets PERMISSION_DENIED.
func TestApprovalCommands(t *testing.T) {
	dirs, nodes := twoNodes(t)
	d0 := dirs[0]
	send := func() string {
		t.Helper()
		code, out, errOut := runIn(t, "", "send", "--data-dir", d0, "--to", "test:cli:agent1", "--intent", "notify",
			"--payload", `{"deploy":"prod"}`, "--require-approval", "-o", "json")
		var res api.SendResult
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Status != protocol.ResponsePending {
			t.Fatalf("send --require-approval: exit %d, %s %s; want status pending", code, out, errOut)
		}
		return res.MessageID
	}
	id := send()
	code, out, errOut := runIn(t, "", "approvals", "--data-dir", d0, "-o", "json")
	var doc api.ApprovalsDoc
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Held) != 1 || doc.Held[0].MessageID != id {
		t.Fatalf("approvals: exit %d, %s %s", code, out, errOut)
	}
	code, out, _ = runIn(t, "", "approvals", "--data-dir", d0)
	for _, want := range []string{"MESSAGE", "EXPIRES", id, "test:cli:agent1", "request/notify", `{"deploy":"prod"}`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("approvals table: exit %d, %q lacks %q", code, out, want)
		}
	}
	if nodes[1].Inbox().Len() != 0 {
		t.Fatal("the recipient got a held message")
	}
	if code, out, errOut := runIn(t, "", "approve", id, "--data-dir", d0, "--by", "alice"); code != 0 || !strings.Contains(out, "approved") || !strings.Contains(out, "by alice") {
		t.Fatalf("approve: exit %d, %s %s", code, out, errOut)
	}
	testsupport.WaitFor(t, 10*time.Second, "the approved message to arrive", func() bool { return nodes[1].Inbox().Len() == 1 })

	id2 := send()
	if code, out, errOut := runIn(t, "", "reject", id2, "--data-dir", d0, "--by", "bob", "--reason", "change freeze"); code != 0 || !strings.Contains(out, "rejected") {
		t.Fatalf("reject: exit %d, %s %s", code, out, errOut)
	}
	testsupport.WaitFor(t, 10*time.Second, "the rejection to reach the sender's inbox", func() bool { return nodes[0].Inbox().Len() == 1 })
	d := nodes[0].Inbox().List(0)[0]
	if pe, err := protocol.ErrorOf(d.Msg); err != nil || pe.Code != protocol.CodePermissionDenied || d.Msg.Envelope.CorrelationID != id2 || !strings.Contains(pe.Message, "change freeze") {
		t.Fatalf("the sender's inbox holds %s; want PERMISSION_DENIED about %s", d.Msg.Message.Payload, id2)
	}
	if code, out, _ := runIn(t, "", "approvals", "--data-dir", d0, "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Held) != 0 {
		t.Fatalf("approvals after the decisions: exit %d, %s", code, out)
	}
	if code, _, errOut := runIn(t, "", "approve", id2, "--data-dir", d0); code == 0 || !strings.Contains(errOut, "no message "+id2+" waits for approval") {
		t.Fatalf("approving a rejected message: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "reject", "--data-dir", d0); code == 0 || !strings.Contains(errOut, "accepts 1 arg") {
		t.Fatalf("reject without an id: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "{}", "send", "--data-dir", d0, "-f", "-", "--require-approval"); code == 0 || !strings.Contains(errOut, "security.require_approval") {
		t.Fatalf("--require-approval with --file: exit %d, %s", code, errOut)
	}
}
