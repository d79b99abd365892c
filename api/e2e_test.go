package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// An agent sends through its node's API (202 with the id); the recipient's agent finds it in
// its inbox through its own API and takes it; the inbox is then empty.
func TestE2E_SendAndPull(t *testing.T) {
	m := newAPIMesh(t, 3, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	res, err := m.clients[0].Send(ctx, request(agentName(2), protocol.IntentHandoff, `{"task":"review"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.MessageID == "" || res.Status != "accepted" {
		t.Fatalf("send result %+v", res)
	}
	doc, err := m.clients[2].Inbox(ctx, 0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Messages) != 1 || doc.Messages[0].Message.Envelope.MessageID != res.MessageID {
		t.Fatalf("inbox %+v, want the message %s", doc, res.MessageID)
	}
	got := decoded(t, doc.Messages[0].Message)
	if got.Envelope.Sender.AgentID != agentName(0) || protocol.Verify(got) != nil {
		t.Fatalf("message not signed by node 0: sender %s", got.Envelope.Sender.AgentID)
	}
	if err := m.clients[2].Ack(ctx, res.MessageID); err != nil {
		t.Fatal(err)
	}
	if m.nodes[2].Inbox().Len() != 0 {
		t.Fatal("ack did not take the message")
	}
	var ae *apiclient.APIError
	if err := m.clients[2].Ack(ctx, res.MessageID); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("second ack: %v, want 404", err)
	}
}

// A request with ?wait returns the response that the recipient's agent posts, correlated to
// the request; YAML in, YAML out.
func TestE2E_RequestWaitYAML(t *testing.T) {
	m := newAPIMesh(t, 3, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	agentDone := make(chan error, 1)
	go func() { agentDone <- answerOnce(ctx, m.clients[1], agentName(1)) }()
	body := "envelope:\n  recipient:\n    agent_id: " + agentName(1) + "\nmessage:\n  type: request\n  intent: handoff\n  payload:\n    task: summarise\n"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.servers[0].URL()+MessagePath+"?wait=10s", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+m.servers[0].Token())
	req.Header.Set("Content-Type", "application/x-yaml")
	req.Header.Set("Accept", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/yaml") {
		t.Fatalf("status %d, type %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	got, err := protocol.DecodeYAML(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Message.Type != apiclient.TypeResponse || got.Envelope.Sender.AgentID != agentName(1) || !bytes.Contains(got.Message.Payload, []byte(agentName(1))) {
		t.Fatalf("response %s", raw)
	}
	if protocol.Verify(got) != nil {
		t.Fatal("response signature does not verify after YAML round trip")
	}
	if err := <-agentDone; err != nil {
		t.Fatal(err)
	}
	// The Go client does the same in JSON.
	go func() { agentDone <- answerOnce(ctx, m.clients[2], agentName(2)) }()
	r2, err := m.clients[0].Request(ctx, request(agentName(2), protocol.IntentHandoff, `{}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Envelope.Sender.AgentID != agentName(2) {
		t.Fatalf("response from %s", r2.Envelope.Sender.AgentID)
	}
	if err := <-agentDone; err != nil {
		t.Fatal(err)
	}
}

// The token file is 0600 and stable; api.addr names the running server and goes on Close.
func TestServer_TokenAndAddrFiles(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{})
	dir := m.dirs[0]
	st, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v", st.Mode().Perm())
	}
	tok, err := LoadOrCreateToken(dir)
	if err != nil || tok != m.servers[0].Token() {
		t.Fatalf("token reloaded as %q (%v), server has %q", tok, err, m.servers[0].Token())
	}
	if addr, err := ReadAddr(dir); err != nil || addr != m.servers[0].Addr() {
		t.Fatalf("api.addr %q (%v), server at %s", addr, err, m.servers[0].Addr())
	}
	c, err := apiclient.Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, err := c.Status(testCtx(t, 5*time.Second)); err != nil || st.AgentID != agentName(0) {
		t.Fatalf("status %+v, %v", st, err)
	}
	if err := m.servers[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.servers[0].Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := os.Stat(filepath.Join(dir, AddrFile)); !os.IsNotExist(err) {
		t.Fatal("api.addr left behind after Close")
	}
	var nn *apiclient.NoNodeError
	if _, err := apiclient.Dial(dir); !errors.As(err, &nn) || !strings.Contains(err.Error(), "iacp-node run") {
		t.Fatalf("Dial after Close: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, TokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable token must be refused: %v", err)
	}
}

// Status, peers, agents (gossip off: empty with a note), outbox (durable, the default, with
// nothing waiting), healthz without a token, metrics with counters.
func TestE2E_RestEndpoints(t *testing.T) {
	m := newAPIMesh(t, 3, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	c := m.clients[0]
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AgentID != agentName(0) || st.PeerID != m.nodes[0].ID().String() || st.Peers != 2 || !st.Inbox || st.Discovery != nil {
		t.Fatalf("status %+v", st)
	}
	peers, err := c.Peers(ctx)
	if err != nil || len(peers.Peers) != 2 {
		t.Fatalf("peers %+v, %v", peers, err)
	}
	ag, err := c.Agents(ctx)
	if err != nil || len(ag.Agents) != 0 || ag.Note == "" {
		t.Fatalf("agents %+v, %v", ag, err)
	}
	ob, err := c.Outbox(ctx)
	if err != nil || !ob.Durable || len(ob.Entries) != 0 || ob.Note != "" {
		t.Fatalf("outbox %+v, %v", ob, err)
	}
	var ae *apiclient.APIError
	if _, err := c.Discover(ctx, apiclient.CapabilityQuery{}); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("discover with discovery off: %v", err)
	}
	noTok := apiclient.New(m.servers[0].Addr(), "")
	defer noTok.Close()
	if h, err := noTok.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("healthz without token: %+v %v", h, err)
	}
	if _, err := m.clients[0].Send(ctx, request(agentName(1), protocol.IntentHandoff, `{}`)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(m.servers[0].URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Gossip is off in this mesh: its gauges are there, at zero.
	for _, want := range []string{"iacp_api_messages_sent_total 1", "iacp_peers 2", "iacp_inbox_depth 0", "iacp_api_request_duration_seconds_bucket",
		"iacp_mesh_interval_seconds 0\n", "iacp_liveness_agents 0\n"} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("metrics lack %q:\n%s", want, raw)
		}
	}
}

// A webhook agent (an HTTP server on loopback) gets inbound messages POSTed; it fails twice,
// the node retries with backoff, and the third answer acknowledges the message. Its 200 with
// a response document answers the requester synchronously.
func TestE2E_Webhook(t *testing.T) {
	hook := newHookAgent(t, 2)
	m := newAPIMesh(t, 3, meshOpts{server: func(i int) []Option {
		if i != 2 {
			return nil
		}
		return []Option{WithWebhook(hook.URL(), "hook-secret"), WithWebhookBackoff(5*time.Millisecond, 50*time.Millisecond)}
	}})
	ctx := testCtx(t, 20*time.Second)
	resp, err := m.clients[0].Request(ctx, request(agentName(2), protocol.IntentHandoff, `{"task":"hook"}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Envelope.Sender.AgentID != agentName(2) || !bytes.Contains(resp.Message.Payload, []byte("from-hook")) {
		t.Fatalf("response %+v", resp)
	}
	if got := hook.calls.Load(); got != 3 {
		t.Fatalf("webhook called %d times, want 2 failures and 1 success", got)
	}
	if hook.badAuth.Load() != 0 {
		t.Fatal("webhook POST lacked the configured bearer token")
	}
	testsupport.WaitFor(t, 5*time.Second, "inbox emptied by the webhook ack", func() bool { return m.nodes[2].Inbox().Len() == 0 })
}
