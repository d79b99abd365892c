package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A real stdio MCP session. The SDK's client launches `iacp-node mcp` as an MCP client
// application does (at login, say) before the node runs: the server starts, a call says that
// no node runs; once the node runs, the next call reaches it. It lists its tools and
// resources; the session ends cleanly when the client closes it.
func TestMCP_RealStdioSession(t *testing.T) {
	p := newProc(t, "solo", "e2e:lab:solo")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := execBinary("mcp", "--data-dir", p.dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 10 {
		t.Fatalf("tools: %v %+v", err, tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "inbox", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), "INTERNAL_ERROR: no iacp-node is running") {
		t.Fatalf("inbox before the node runs: %v %+v", err, res)
	}
	p.start()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "inbox", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("inbox once the node runs: %v %+v", err, res)
	}
	rs, err := cs.ListResources(ctx, nil)
	if err != nil || len(rs.Resources) != 2 {
		t.Fatalf("resources: %v %+v", err, rs)
	}
	if err := cs.Close(); err != nil && !strings.Contains(err.Error(), "signal") {
		t.Fatalf("close: %v", err)
	}
}
