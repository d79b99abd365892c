package api

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// runExample runs an example agent against node 1's API for one handoff round trip: node 0's
// agent requests through the HTTP binding and gets the example's correlated response. env
// is added to the example's environment.
func runExample(t *testing.T, interp, script string, env ...string) {
	path, err := exec.LookPath(interp)
	if err != nil {
		t.Skipf("%s is not installed", interp)
	}
	m := newAPIMesh(t, 2, meshOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "../examples/"+script, "--data-dir", m.dirs[1], "--once")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	resp, err := m.clients[0].Request(ctx, request(agentName(1), protocol.IntentHandoff, `{"task":"translate"}`), 20*time.Second)
	if err != nil {
		cancel()
		_ = cmd.Wait()
		t.Fatalf("%v; agent output:\n%s", err, out.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, out.String())
	}
	if resp.Envelope.Sender.AgentID != agentName(1) || !bytes.Contains(resp.Message.Payload, []byte(`"translate"`)) {
		t.Fatalf("response %s", resp.Message.Payload)
	}
	if m.nodes[1].Inbox().Len() != 0 {
		t.Fatal("the example did not acknowledge the request")
	}
}

// TestExample_Python runs the example on the iacp library, from the repository's copy.
func TestExample_Python(t *testing.T) {
	lib, err := filepath.Abs("../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	runExample(t, "python3", "handoff_agent.py", "PYTHONPATH="+lib)
}

// TestExample_PythonHTTP runs the example that uses only HTTP and the standard library.
func TestExample_PythonHTTP(t *testing.T) { runExample(t, "python3", "handoff_agent_http.py") }

func TestExample_NodeJS(t *testing.T) { runExample(t, "node", "handoff_agent.mjs") }
