package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

func TestMain(m *testing.M) {
	testsupport.VerifyTestMain(m, testsupport.MocknetPipes(), testsupport.ProcessWorkers())
}

// mesh starts two mocknet nodes with discovery and gossip, node 1 joining through node 0, each
// with its local API; node 1's agent offers the tool "summarise" and answers handoff requests.
// It returns node 0's API client and server.
func mesh(t *testing.T) (*apiclient.Client, *api.Server) {
	t.Helper()
	net := testsupport.Mocknet(t, 2, testsupport.FirstPort(7300), testsupport.LinkOnly())
	var clients []*apiclient.Client
	var servers []*api.Server
	var boot string
	for i := range 2 {
		dir := t.TempDir()
		opts := []node.Option{node.WithHost(net.Hosts[i], net.Keys[i]), node.WithDataDir(dir), node.WithInbox(true),
			node.WithAgent([]string{"test:mcp:asker", "test:mcp:summariser"}[i], protocol.Manifest{Tools: []string{[]string{"chat", "summarise"}[i]}}),
			node.WithLogger(slog.New(slog.DiscardHandler)), node.WithHeartbeatInterval(time.Second)}
		if i > 0 {
			opts = append(opts, node.WithBootstrap(boot))
		}
		nd, err := node.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			boot = nd.Addrs()[0].String()
		} else {
			nd.Handle(protocol.IntentHandoff, func(_ context.Context, r *node.Request) error {
				return r.Reply(protocol.ResponseAccepted, map[string]any{"summary": "short"})
			})
		}
		srv, err := api.New(nd, api.WithListen("127.0.0.1:0"), api.WithDataDir(dir), api.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		c := apiclient.New(srv.Addr(), srv.Token())
		t.Cleanup(func() { c.Close(); srv.Close(); nd.Close() })
		clients, servers = append(clients, c), append(servers, srv)
	}
	return clients[0], servers[0]
}

// session connects an MCP client to s over the SDK's in-memory transport.
func session(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait(); cancel() })
	return cs
}

// call calls a tool and returns its structured answer, failing on a tool error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v: %s", name, err, raw)
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// An MCP client session lists the tools (each with an input schema), discovers an agent by
// capability, requests from it, sends it a message, reads the agents list and the inbox
// (tools and resources), and gets the node's code when a call is refused.
func TestMCP_SessionDiscoversRequestsAndReadsTheInbox(t *testing.T) {
	c, _ := mesh(t)
	cs := session(t, New(Static(c), "test"))
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil {
			t.Errorf("tool %s has no input schema", tl.Name)
		}
	}
	if got := strings.Join(names, ","); got != "agents,ask,broadcast,cancel,discover,inbox,outbox,request,resolve,send" {
		t.Fatalf("tools %s", got)
	}

	var found map[string]any
	testsupport.WaitFor(t, 30*time.Second, "discover finds the summariser", func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "discover", Arguments: map[string]any{"tools": []string{"summarise"}}})
		if err != nil || res.IsError {
			return false
		}
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &found)
		matches, _ := found["matches"].([]any)
		return len(matches) == 1
	})
	agent := found["matches"].([]any)[0].(map[string]any)["agent_id"]
	if agent != "test:mcp:summariser" {
		t.Fatalf("discovered %v", found)
	}

	answer := call(t, cs, "request", map[string]any{"to": agent, "payload": map[string]any{"text": "a long text"}, "wait_seconds": 10})
	if answer["from"] != agent || answer["payload"].(map[string]any)["summary"] != "short" {
		t.Fatalf("request answered %v", answer)
	}
	// A broadcast query to the group summarise: the summariser answers.
	testsupport.WaitFor(t, 30*time.Second, "the summariser answering a query to its group", func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"group": "summarise", "intent": "handoff",
			"payload": map[string]any{"text": "x"}, "deadline_seconds": 3, "count": 1}})
		if err != nil || res.IsError {
			return false
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var doc apiclient.AskDoc
		_ = json.Unmarshal(raw, &doc)
		return len(doc.Answers) == 1 && doc.Answers[0].AgentID == agent && strings.Contains(string(doc.Answers[0].Payload), "short")
	})
	if got := call(t, cs, "resolve", map[string]any{"agent_id": agent}); got["agent_id"] != agent {
		t.Fatalf("resolve %v", got)
	}
	if got := call(t, cs, "agents", map[string]any{}); got["agents"] == nil {
		t.Fatalf("agents %v", got)
	}
	if got := call(t, cs, "broadcast", map[string]any{"event_type": "build.done"}); got["message_id"] == nil {
		t.Fatalf("broadcast %v", got)
	}
	// The summariser's own answer to a request sent without waiting lands in the inbox.
	if got := call(t, cs, "send", map[string]any{"to": agent, "type": "request", "payload": map[string]any{"text": "x"}}); got["message_id"] == nil {
		t.Fatalf("send %v", got)
	}
	inbox := call(t, cs, "inbox", map[string]any{"wait_seconds": 10, "ack": true})
	if msgs, _ := inbox["messages"].([]any); len(msgs) != 1 {
		t.Fatalf("inbox %v", inbox)
	}
	if msgs, _ := call(t, cs, "inbox", map[string]any{})["messages"].([]any); len(msgs) != 0 {
		t.Fatalf("ack left %d messages", len(msgs))
	}

	for _, uri := range []string{AgentsURI, InboxURI} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 || !json.Valid([]byte(res.Contents[0].Text)) {
			t.Fatalf("resource %s: %v %+v", uri, err, res)
		}
	}

	// Refusals name the node's code; bad input says what is wrong.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request", Arguments: map[string]any{"to": "test:mcp:nobody", "wait_seconds": 2}})
	if err != nil || !res.IsError || !(strings.HasPrefix(text(res), "AGENT_NOT_FOUND") || strings.HasPrefix(text(res), "TIMEOUT")) {
		t.Fatalf("request to nobody: %v %s", err, text(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "resolve", Arguments: map[string]any{"agent_id": "no colons"}})
	if err != nil || !res.IsError || !strings.HasPrefix(text(res), "PAYLOAD_INVALID: ") || strings.Count(text(res), "PAYLOAD_INVALID") != 1 {
		t.Fatalf("resolve of a bad id: %v %s", err, text(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "request", Arguments: map[string]any{"to": agent, "wait_seconds": 900}})
	if err != nil || !res.IsError || !strings.HasPrefix(text(res), "PAYLOAD_INVALID: wait_seconds is 900") {
		t.Fatalf("a wait too long: %v %s", err, text(res))
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request", Arguments: map[string]any{"to": 7}}); err == nil && !res.IsError {
		t.Fatal("an input that breaks the schema was taken")
	}
}

// Over streamable HTTP the server asks for the node's API token.
func TestMCP_HTTPNeedsTheToken(t *testing.T) {
	c, srv := mesh(t)
	hs := httptest.NewServer(HTTPHandler(New(Static(c), "test"), srv.Token()))
	defer hs.Close()
	ctx := context.Background()
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil); err == nil {
		t.Fatal("connected without the token")
	}
	hc := &http.Client{Transport: bearer{srv.Token()}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := call(t, cs, "agents", map[string]any{}); got["agents"] == nil {
		t.Fatalf("agents over HTTP %v", got)
	}
}

// bearer adds the token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
