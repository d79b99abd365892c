package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/workflow"
)

// A workflow declared in YAML runs through the local API: started with ?wait, listed, read
// back step by step; a bad declaration is a 400 naming the step; cancel of an unknown id 404.
func TestWorkflows_RunOverHTTP(t *testing.T) {
	m := newAPIMesh(t, 3, meshOpts{})
	for i := 1; i < 3; i++ {
		m.nodes[i].Handle(protocol.IntentHandoff, func(_ context.Context, r *node.Request) error {
			return r.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i)})
		})
	}
	c := m.clients[0]
	ctx := testCtx(t, 60*time.Second)
	decl := fmt.Sprintf(`workflow_id: wf-http
workflow_name: two steps
steps:
  - id: first
    agent: %q
    payload: {task: plan}
  - id: second
    agent: %q
    depends_on: [first]
    timeout: 10s
`, agentName(1), agentName(2))
	st, err := StartWorkflow(ctx, c, []byte(decl), 30*time.Second)
	if err != nil || st.Status != workflow.Completed || len(st.Steps) != 2 {
		t.Fatalf("workflow: %+v, %v", st, err)
	}
	if second := st.Steps[1]; second.Agent != agentName(2) || !strings.Contains(string(second.Result), agentName(2)) {
		t.Fatalf("second step: %+v", second)
	}
	list, err := Workflows(ctx, c)
	if err != nil || len(list) != 1 || list[0].Spec.ID != "wf-http" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if got, err := Workflow(ctx, c, "wf-http"); err != nil || got.Status != workflow.Completed {
		t.Fatalf("status: %+v, %v", got, err)
	}
	var ae *apiclient.APIError
	if _, err := StartWorkflow(ctx, c, []byte(`steps: [{id: a, agent: "x:y:z", depends_on: [nope]}]`), 0); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("bad declaration: %v, want 400 naming the dependency", err)
	}
	if _, err := CancelWorkflow(ctx, c, "nope"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("cancel unknown: %v, want 404", err)
	}
}
