package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/workflow"
)

// workflow run, status, list and cancel through the running node.
func TestWorkflowCommands(t *testing.T) {
	t.Cleanup(noLeaks(t))
	dirs, nodes := twoNodes(t)
	nodes[1].Handle(protocol.IntentHandoff, func(_ context.Context, r *node.Request) error {
		return r.Reply(protocol.ResponseAccepted, map[string]any{"ok": true})
	})
	d0 := dirs[0]
	file := filepath.Join(t.TempDir(), "wf.yaml")
	decl := "workflow_id: wf-cli\nsteps:\n  - {id: one, agent: test:cli:agent1}\n  - {id: two, agent: test:cli:agent1, depends_on: [one]}\n"
	if err := os.WriteFile(file, []byte(decl), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runIn(t, "", "workflow", "run", file, "--data-dir", d0)
	if code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "two") {
		t.Fatalf("workflow run: exit %d, %s %s", code, out, errOut)
	}
	code, out, _ = runIn(t, "", "workflow", "status", "wf-cli", "--data-dir", d0, "-o", "json")
	var st workflow.State
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Status != workflow.Completed || st.Steps[1].Agent != "test:cli:agent1" {
		t.Fatalf("workflow status: exit %d, %s", code, out)
	}
	if code, out, _ := runIn(t, "", "workflow", "list", "--data-dir", d0); code != 0 || !strings.Contains(out, "wf-cli") || !strings.Contains(out, "2/2") {
		t.Fatalf("workflow list: exit %d, %s", code, out)
	}
	if code, _, errOut := runIn(t, "", "workflow", "cancel", "nope", "--data-dir", d0); code == 0 || !strings.Contains(errOut, "no workflow nope") {
		t.Fatalf("cancel unknown: exit %d, %s", code, errOut)
	}
	if err := os.WriteFile(file, []byte("steps: [{id: a, agent: test:cli:agent1, depends_on: [a]}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runIn(t, "", "workflow", "run", file, "--data-dir", d0); code == 0 || !strings.Contains(errOut, "cycle") {
		t.Fatalf("a cyclic workflow: exit %d, %s", code, errOut)
	}
}
