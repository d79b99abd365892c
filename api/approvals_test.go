package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// acpCommand is an ACP v2 AgentCommand to `to` that requires approval.
func acpCommand(id, to string) string {
	return `{"id":"` + id + `","timestamp":"2026-11-23T10:00:00.000Z","version":"2.0","from":"orchestrator","to":"` + to +
		`","priority":"high","action":"EXECUTE","parameters":{"deploy":"prod","replicas":3},"security":{"permissions":[],"requireApproval":true}}`
}

// waitHeld waits until c lists n held messages and returns them.
func waitHeld(t *testing.T, c *apiclient.Client, n int) []ApprovalItem {
	t.Helper()
	var held []ApprovalItem
	testsupport.WaitFor(t, 10*time.Second, "held messages", func() bool {
		doc, err := Approvals(testCtx(t, 5*time.Second), c)
		held = doc.Held
		return err == nil && len(held) == n
	})
	return held
}

// An ACP v2 command with requireApproval posted to the HTTP binding is held (202 pending),
// listed by GET /v1/approvals, announced on the event stream, and delivered once approved.
func TestApprovals_ACPv2CommandHeldUntilApprovedOverHTTP(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	c, rc := m.clients[0], m.clients[1]
	sctx, stop := context.WithCancel(testCtx(t, 30*time.Second))
	events := make(chan EventItem, 8)
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- Events(sctx, c, EventFilter{Kinds: []string{KindApproval}}, func(it EventItem) error { events <- it; return nil })
	}()
	defer func() { stop(); <-streamDone }()
	time.Sleep(100 * time.Millisecond) // the stream subscribes from now on

	id := newUUID()
	res, err := c.SendDocument(testCtx(t, 10*time.Second), []byte(acpCommand(id, agentName(1))), "acp-v2")
	if err != nil || res.Status != protocol.ResponsePending || res.MessageID != id {
		t.Fatalf("posting a command that requires approval: %+v %v; want status pending", res, err)
	}
	held := waitHeld(t, c, 1)
	if h := held[0]; h.MessageID != id || h.To != agentName(1) || h.From != agentName(0) || !strings.Contains(h.Summary, `"deploy":"prod"`) || h.ExpiresAt.IsZero() {
		t.Fatalf("held: %+v", h)
	}
	req, _ := http.NewRequest(http.MethodGet, m.servers[0].URL()+"/v1/approvals", nil)
	req.Header.Set("Authorization", "Bearer "+m.servers[0].Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(raw), `"payload"`) || !strings.Contains(string(raw), `"summary"`) {
		t.Fatalf("GET /v1/approvals: %s; want a summary, not the payload", raw)
	}
	if doc, err := rc.Inbox(testCtx(t, 5*time.Second), 0, 0); err != nil || len(doc.Messages) != 0 {
		t.Fatalf("the recipient has %d messages before approval (%v)", len(doc.Messages), err)
	}
	dec, err := Approve(testCtx(t, 10*time.Second), c, id, "alice")
	if err != nil || dec.Decision != "approved" || dec.By != "alice" {
		t.Fatalf("approve: %+v %v", dec, err)
	}
	got := rawInbox(t, m.servers[1], "", 1)
	if len(got) != 1 {
		t.Fatalf("the recipient got %d messages, want 1", len(got))
	}
	if doc, _ := Approvals(testCtx(t, 5*time.Second), c); len(doc.Held) != 0 {
		t.Fatalf("still held after approval: %+v", doc.Held)
	}
	for _, want := range []string{"held", "approved"} {
		select {
		case it := <-events:
			if it.Kind != KindApproval || it.Approval == nil || it.Approval.Kind != want || it.Approval.MessageID != id {
				t.Fatalf("event %+v, want approval %s of %s", it, want, id)
			}
			if want == "approved" && it.Approval.By != "alice" {
				t.Fatalf("approved by %q, want alice", it.Approval.By)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event on the stream", want)
		}
	}
	if _, err := Approve(testCtx(t, 5*time.Second), c, id, ""); statusOf(err) != http.StatusNotFound {
		t.Fatalf("approving again: %v; want 404", err)
	}
}

func statusOf(err error) int {
	var ae *apiclient.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// A rejection reaches an agent waiting with ?wait as an error: 403, PERMISSION_DENIED, in its
// own dialect, naming the command; an IACP agent gets PERMISSION_DENIED with the message id.
func TestApprovals_RejectionReachesTheWaitingAgent(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	c, s := m.clients[0], m.servers[0]
	type answer struct {
		status int
		body   string
	}
	done := make(chan answer, 1)
	id := newUUID()
	go func() {
		req, _ := http.NewRequestWithContext(testCtx(t, 30*time.Second), http.MethodPost, s.URL()+MessagePath+"?wait=20s", strings.NewReader(acpCommand(id, agentName(1))))
		req.Header.Set("Authorization", "Bearer "+s.Token())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{body: err.Error()}
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{resp.StatusCode, string(raw)}
	}()
	waitHeld(t, c, 1)
	if dec, err := Reject(testCtx(t, 10*time.Second), c, id, "bob", "change freeze"); err != nil || dec.Decision != "rejected" {
		t.Fatalf("reject: %+v %v", dec, err)
	}
	select {
	case a := <-done:
		d := doc(t, []byte(a.body))
		e, _ := d["error"].(map[string]any)
		if a.status != http.StatusForbidden || d["commandId"] != id || d["status"] != "failed" || e["code"] != "permission_error" || !strings.Contains(e["message"].(string), "change freeze") {
			t.Fatalf("the waiting ACP v2 agent got %d %s; want 403, a failed AgentResponse to %s with permission_error and the reason", a.status, a.body, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting agent got no answer after the rejection")
	}

	// IACP, ?wait: the error document names the message.
	mid := newUUID()
	iacp := `{"envelope":{"message_id":"` + mid + `","recipient":{"agent_id":"` + agentName(1) + `"}},"message":{"type":"request","intent":"handoff","payload":{}},"security":{"require_approval":true}}`
	go func() {
		status, _, ed := post(t, s, s.Token(), "?wait=20s", iacp)
		done <- answer{status, string(ed.Error.Code) + " " + ed.MessageID}
	}()
	waitHeld(t, c, 1)
	if _, err := Reject(testCtx(t, 10*time.Second), c, mid, "", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.status != http.StatusForbidden || a.body != "PERMISSION_DENIED "+mid {
			t.Fatalf("the waiting IACP agent got %d %q; want 403 PERMISSION_DENIED %s", a.status, a.body, mid)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting agent got no answer after the rejection")
	}
}

// Decisions refuse what they cannot take: an unknown id (404), a malformed body (400), a
// call without the token (401).
func TestApprovals_DecisionsRefuseBadInput(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{})
	s := m.servers[0]
	call := func(path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	id := newUUID()
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/v1/approvals/" + id + "/approve", "", http.StatusNotFound},
		{"/v1/approvals/" + id + "/reject", `{"by":"x"}`, http.StatusNotFound},
		{"/v1/approvals/" + id + "/reject", `{"by":5}`, http.StatusBadRequest},
		{"/v1/approvals/" + id + "/approve", `{"by":"` + strings.Repeat("x", 200) + `"}`, http.StatusBadRequest},
	} {
		if got := call(c.path, c.body); got != c.want {
			t.Errorf("POST %s %s: %d, want %d", c.path, c.body, got, c.want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v1/approvals", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/approvals without the token: %d, want 401", resp.StatusCode)
	}
}
