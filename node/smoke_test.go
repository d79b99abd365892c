package node

import (
	"context"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestSmokeRequestResponse(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		return r.Reply(protocol.ResponseAccepted, map[string]any{"result": "done"})
	})
	req, err := a.Builder().Request(agentName(1), protocol.IntentHandoff, map[string]any{"task": "x"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", resp.Message.Payload)
}
