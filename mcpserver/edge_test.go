package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
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

// Every member of every tool's input has one plain JSON Schema type (or none, for any JSON):
// no ["null", "array"] unions, which the MCP Inspector CLI and many function-calling
// converters refuse. The inputs are objects, as MCP asks.
func TestMCP_InputSchemasHavePlainTypes(t *testing.T) {
	cs := session(t, New(Static(apiclient.New("127.0.0.1:1", "x")), "test"))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		raw, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Type       any                       `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" {
			t.Fatalf("tool %s: input schema %s is not an object schema", tl.Name, raw)
		}
		for name, p := range s.Properties {
			if typ, ok := p["type"]; ok {
				if _, plain := typ.(string); !plain {
					t.Errorf("tool %s: %s has type %v: want one plain type", tl.Name, name, typ)
				}
			}
		}
	}
	raw, _ := json.Marshal(tools.Tools)
	if !strings.Contains(string(raw), `"tools":{"description":"tools every match must have","items":{"type":"string"},"type":"array"}`) {
		t.Fatalf("discover's tools is not a plain array of strings: %s", raw)
	}
}

// The server starts without a node: a call made before the node runs says so, in the code
// style, and the first call after the node started reaches it (the server dials again).
func TestMCP_StartsBeforeTheNodeAndReachesItOnceUp(t *testing.T) {
	dir := t.TempDir()
	cs := session(t, New(func() (*apiclient.Client, error) { return apiclient.Dial(dir) }, "test"))
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agents", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.HasPrefix(text(res), "INTERNAL_ERROR: no iacp-node is running with data dir "+dir) {
		t.Fatalf("a call without a node: %v %s", err, text(res))
	}
	net := testsupport.Mocknet(t, 1, testsupport.FirstPort(7350))
	nd, err := node.New(node.WithHost(net.Hosts[0], net.Keys[0]), node.WithDataDir(dir), node.WithAgent("test:mcp:late", protocol.Manifest{}),
		node.WithDiscovery(false), node.WithGossip(false), node.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(nd, api.WithListen("127.0.0.1:0"), api.WithDataDir(dir), api.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		nd.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); nd.Close() })
	if got := call(t, cs, "agents", map[string]any{}); got["agents"] == nil {
		t.Fatalf("agents once the node runs: %v", got)
	}
}

// A send to a mistyped agent id fails at once with AGENT_NOT_FOUND; with queue_unknown it is
// queued, the outbox tool lists it, and cancel takes it back.
func TestMCP_TypoFailsAtOnceAndQueuedMailCanBeCancelled(t *testing.T) {
	c, _ := mesh(t)
	cs := session(t, New(Static(c), "test"))
	ctx := context.Background()
	args := map[string]any{"to": "test:mcp:typo", "type": "event", "payload": map[string]any{"event_type": "x"}}
	// Until the node settled in the mesh, its DHT's "not found" is no answer and the message is
	// queued (cancelled here); then the typo fails at once.
	var res *mcp.CallToolResult
	testsupport.WaitFor(t, 15*time.Second, "a send to a typo refused", func() bool {
		var err error
		if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "send", Arguments: args}); err != nil {
			t.Fatal(err)
		}
		if !res.IsError {
			call(t, cs, "cancel", map[string]any{"message_id": res.StructuredContent.(map[string]any)["message_id"]})
		}
		return res.IsError
	})
	if !strings.HasPrefix(text(res), "AGENT_NOT_FOUND: no agent test:mcp:typo is known") {
		t.Fatalf("send to a typo: %s", text(res))
	}
	args["queue_unknown"] = true
	sent := call(t, cs, "send", args)
	if sent["status"] != "queued" {
		t.Fatalf("send with queue_unknown: %v", sent)
	}
	if entries, _ := call(t, cs, "outbox", map[string]any{})["entries"].([]any); len(entries) != 1 {
		t.Fatalf("outbox: %v", entries)
	}
	if got := call(t, cs, "cancel", map[string]any{"message_id": sent["message_id"]}); got["cancelled"] != sent["message_id"] {
		t.Fatalf("cancel: %v", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cancel", Arguments: map[string]any{"message_id": sent["message_id"]}})
	if err != nil || !res.IsError || !strings.HasPrefix(text(res), "PAYLOAD_INVALID: message ") {
		t.Fatalf("cancel again: %v %s", err, text(res))
	}
}
