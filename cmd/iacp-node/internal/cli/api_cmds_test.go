package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/cmd/iacp-node/internal/cli"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// twoNodes starts two mocknet nodes (with opts besides the usual) with their APIs on
// 127.0.0.1:0 and returns their data directories; everything stops when the test ends.
func twoNodes(t *testing.T, opts ...node.Option) (dirs [2]string, nodes [2]*node.Node) {
	t.Helper()
	net := testsupport.Mocknet(t, 2, testsupport.FirstPort(7100))
	for i := 0; i < 2; i++ {
		dirs[i] = t.TempDir()
		nd, err := node.New(append([]node.Option{node.WithHost(net.Hosts[i], net.Keys[i]), node.WithAgent(fmt.Sprintf("test:cli:agent%d", i), protocol.Manifest{}),
			node.WithDataDir(dirs[i]), node.WithLogger(slog.New(slog.DiscardHandler)), node.WithInbox(true),
			node.WithDiscovery(false), node.WithGossip(false)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.New(nd, api.WithListen("127.0.0.1:0"), api.WithDataDir(dirs[i]), api.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close(); nd.Close() })
		nodes[i] = nd
	}
	nodes[0].AddPeer("test:cli:agent1", peer.AddrInfo{ID: nodes[1].ID(), Addrs: nodes[1].ListenAddrs()})
	nodes[1].AddPeer("test:cli:agent0", peer.AddrInfo{ID: nodes[0].ID(), Addrs: nodes[0].ListenAddrs()})
	return dirs, nodes
}

func runIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAPICommands_AgainstRunningNodes(t *testing.T) {
	// Registered first, so it runs after the nodes' and servers' cleanups.
	t.Cleanup(noLeaks(t))
	dirs, nodes := twoNodes(t)
	d0, d1 := dirs[0], dirs[1]

	code, out, errOut := runIn(t, "", "status", "--data-dir", d0, "-o", "json")
	var st api.StatusDoc
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.AgentID != "test:cli:agent0" {
		t.Fatalf("status: exit %d, %s %s", code, out, errOut)
	}
	if code, out, _ := runIn(t, "", "status", "--data-dir", d0); code != 0 || !strings.Contains(out, "test:cli:agent0") {
		t.Fatalf("status table: %d %s", code, out)
	}
	code, out, errOut = runIn(t, "", "send", "--data-dir", d0, "--to", "test:cli:agent1", "--intent", "notify", "--payload", `{"n":1}`, "-o", "json")
	var res api.SendResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.MessageID == "" {
		t.Fatalf("send: exit %d, %s %s", code, out, errOut)
	}
	// The recipient, a "shell script agent", takes it with inbox --ack -o json: one JSON line.
	code, out, errOut = runIn(t, "", "inbox", "--data-dir", d1, "--ack", "-o", "json")
	if code != 0 || !strings.Contains(out, res.MessageID) || strings.Count(out, "\n") != 1 {
		t.Fatalf("inbox: exit %d, %q %s", code, out, errOut)
	}
	if nodes[1].Inbox().Len() != 0 {
		t.Fatal("inbox --ack left the message")
	}
	// request --wait, answered by agent 1 through its API; YAML output.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go func() {
		c, err := apiclient.Dial(d1)
		if err != nil {
			return
		}
		defer c.Close()
		doc, err := c.Inbox(ctx, 0, 10*time.Second)
		if err != nil || len(doc.Messages) == 0 {
			return
		}
		req := doc.Messages[0].Message
		resp := &apiclient.Message{}
		resp.Envelope.Recipient.AgentID = req.Envelope.Sender.AgentID
		resp.Envelope.CorrelationID = req.Envelope.MessageID
		resp.Message = apiclient.Body{Type: apiclient.TypeResponse, Intent: req.Message.Intent, Payload: []byte(`{"status":"accepted","answer":42}`)}
		_, _ = c.Send(ctx, resp)
		_ = c.Ack(ctx, req.Envelope.MessageID)
	}()
	code, out, _ = runIn(t, "", "request", "--data-dir", d0, "--to", "test:cli:agent1", "--payload", "@-", "--wait", "10s", "-o", "yaml")
	if code == 0 {
		t.Fatalf("request with an empty @- payload must fail: %s", out)
	}
	code, out, errOut = runIn(t, `{"task":"x"}`, "request", "--data-dir", d0, "--to", "test:cli:agent1", "--payload", "@-", "--wait", "10s", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "answer: 42") || !strings.Contains(out, "identity_sig:") {
		t.Fatalf("request: exit %d, %s %s", code, out, errOut)
	}
	// A whole document on stdin.
	doc := "envelope:\n  recipient:\n    agent_id: test:cli:agent1\nmessage:\n  type: event\n  intent: notify\n  payload:\n    event_type: x.done\n"
	if code, out, errOut := runIn(t, doc, "send", "--data-dir", d0, "-f", "-"); code != 0 || !strings.Contains(out, "accepted") {
		t.Fatalf("send -f -: exit %d, %s %s", code, out, errOut)
	}
	// Another draft's document, recognised: ElizaOS section 4.1's TASK_REQUEST.
	eliza := `{"mcp_version":"0.1.0","message_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","performative":"TASK_REQUEST",` +
		`"sender":{"agent_id":"Eddy"},"receiver":{"agent_id":"test:cli:agent1"},"reply_with":"debug-task-42",` +
		`"timestamp":"2025-05-20T09:00:00Z","payload":{"task_type":"debug_code"}}`
	if code, out, errOut := runIn(t, eliza, "send", "--data-dir", d0, "-f", "-"); code != 0 || !strings.Contains(out, "7c9e6679-7425-40de-944b-e07fc1f90ae7") {
		t.Fatalf("send -f an ElizaOS document: exit %d, %s %s", code, out, errOut)
	}
	// Its conversation, named by its reply_with, as node 0's audit log holds it.
	if code, out, errOut := runIn(t, "", "conversation", "debug-task-42", "--data-dir", d0, "-o", "json"); code != 0 ||
		!strings.Contains(out, `"event":"sent"`) || !strings.Contains(out, "7c9e6679-7425-40de-944b-e07fc1f90ae7") {
		t.Fatalf("conversation: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(t, "", "conversation", "debug-task-42", "--data-dir", d0); code != 0 || !strings.Contains(out, "request/handoff") {
		t.Fatalf("conversation table: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "conversation", "--data-dir", d0); code == 0 || !strings.Contains(errOut, "accepts 1 arg") {
		t.Fatalf("conversation without an id: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, eliza, "send", "--data-dir", d0, "-f", "-", "--dialect", "iacp-1.0"); code == 0 || !strings.Contains(errOut, "iacp-1.0 document") {
		t.Fatalf("send -f with the wrong --dialect: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "send", "--data-dir", d0, "--to", "test:cli:agent1", "--dialect", "elizaos"); code == 0 || !strings.Contains(errOut, "--dialect names the draft of a --file document") {
		t.Fatalf("--dialect without --file: exit %d, %s", code, errOut)
	}
	// request timeout: nobody answers the request within 300ms.
	if code, _, errOut := runIn(t, "", "request", "--data-dir", d0, "--to", "test:cli:agent1", "--wait", "300ms"); code == 0 || !strings.Contains(errOut, "TIMEOUT") {
		t.Fatalf("request timeout: exit %d, %s", code, errOut)
	}
	for _, args := range [][]string{{"peers"}, {"agents"}, {"outbox"}, {"outbox", "-o", "json"}, {"peers", "-o", "yaml"}} {
		if code, out, errOut := runIn(t, "", append(args, "--data-dir", d0)...); code != 0 || out == "" {
			t.Fatalf("%v: exit %d, %s %s", args, code, out, errOut)
		}
	}
	// Agent 1's node pinned agent 0 at its first accepted message; the operator lists and
	// forgets the pin.
	if code, out, errOut := runIn(t, "", "trust", "list", "--data-dir", d1); code != 0 || !strings.Contains(out, "mode: open") || !strings.Contains(out, "test:cli:agent0") {
		t.Fatalf("trust list: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(t, "", "trust", "forget", "test:cli:agent0", "--data-dir", d1, "-o", "json"); code != 0 || !strings.Contains(out, `"forgotten": 1`) {
		t.Fatalf("trust forget: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "trust", "forget", "--data-dir", d1); code == 0 || !strings.Contains(errOut, "name an agent id or --peer") {
		t.Fatalf("trust forget without a name: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "discover", "--data-dir", d0, "--tool", "x"); code == 0 || !strings.Contains(errOut, "discovery is off") {
		t.Fatalf("discover with discovery off: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "broadcast", "--data-dir", d0, "--event", "x"); code == 0 || !strings.Contains(errOut, "gossip") {
		t.Fatalf("broadcast with gossip off: exit %d, %s", code, errOut)
	}
	// tail -o json: an inbound notice for a message sent while it follows.
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer tcancel()
	var tailOut, tailErr bytes.Buffer
	tailDone := make(chan int, 1)
	go func() {
		root := cli.NewRoot(strings.NewReader(""), &lockedBuf{b: &tailOut}, &tailErr)
		root.SetArgs([]string{"tail", "--data-dir", d1, "--kinds", "message", "-o", "json"})
		if err := root.ExecuteContext(tctx); err != nil {
			tailDone <- 1
			return
		}
		tailDone <- 0
	}()
	deadline := time.Now().Add(8 * time.Second)
	for !strings.Contains(readLocked(&tailOut), `"kind":"message"`) {
		if time.Now().After(deadline) {
			t.Fatalf("tail printed %q", readLocked(&tailOut))
		}
		runIn(t, "", "send", "--data-dir", d0, "--to", "test:cli:agent1", "--intent", "notify")
		time.Sleep(100 * time.Millisecond)
	}
	tcancel()
	if code := <-tailDone; code != 0 {
		t.Fatalf("tail exit %d: %s", code, tailErr.String())
	}
}

func TestAPICommands_NoNodeRunning(t *testing.T) {
	defer noLeaks(t)()
	dir := t.TempDir()
	// mcp starts without a node (each call says none runs): stdin's end stops it cleanly.
	if code, _, errOut := runIn(t, "", "mcp", "--data-dir", dir); code != 0 {
		t.Fatalf("mcp without a node: exit %d, stderr %q", code, errOut)
	}
	for _, cmd := range []string{"status", "send", "inbox", "peers", "tail", "conversation"} {
		args := []string{cmd, "--data-dir", dir}
		switch cmd {
		case "send":
			args = append(args, "--to", "a:b:c")
		case "conversation":
			args = append(args, "conv-1")
		}
		code, _, errOut := runIn(t, "", args...)
		if code == 0 || !strings.Contains(errOut, "no node is running with data dir "+dir) || !strings.Contains(errOut, "iacp-node run") {
			t.Fatalf("%s: exit %d, stderr %q", cmd, code, errOut)
		}
	}
}

// send to a mistyped agent id fails at once, saying nothing knows it; --queue-unknown queues
// it (queued), and outbox cancel takes it back. A taken --http port names the flag.
func TestAPICommands_TypoQueueAndCancel(t *testing.T) {
	t.Cleanup(noLeaks(t))
	dirs, _ := twoNodes(t)
	code, _, errOut := runIn(t, "", "send", "--data-dir", dirs[0], "--to", "test:cli:typo", "--intent", "notify")
	if code == 0 || !strings.Contains(errOut, "AGENT_NOT_FOUND: no agent test:cli:typo is known") {
		t.Fatalf("send to a typo: exit %d, %s", code, errOut)
	}
	code, out, errOut := runIn(t, "", "send", "--data-dir", dirs[0], "--to", "test:cli:later", "--intent", "notify", "--queue-unknown", "-o", "json")
	var res api.SendResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Status != "queued" {
		t.Fatalf("send --queue-unknown: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(t, "", "outbox", "cancel", "--data-dir", dirs[0], res.MessageID); code != 0 || !strings.Contains(out, res.MessageID) {
		t.Fatalf("outbox cancel: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "outbox", "cancel", "--data-dir", dirs[0], res.MessageID); code == 0 || !strings.Contains(errOut, "not in the outbox") {
		t.Fatalf("outbox cancel again: exit %d, %s", code, errOut)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if code, _, errOut := runIn(t, "", "mcp", "--data-dir", dirs[0], "--http", taken.Addr().String()); code == 0 || !strings.Contains(errOut, "choose another address with --http") {
		t.Fatalf("mcp --http on a taken port: exit %d, %s", code, errOut)
	}
}
