package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
)

// ask through the running node: a capability query to every agent is answered by agent 1's
// node with its manifest; the table names the agent; bad flags say what to do.
func TestAsk_EveryAgentThroughTheRunningNode(t *testing.T) {
	dirs, _ := twoNodes(t, node.WithGossip(true), node.WithHeartbeatInterval(time.Second))
	var res api.AskDoc
	testsupport.WaitFor(t, 30*time.Second, "agent 1 answering the query", func() bool {
		code, out, errOut := runIn(t, "", "ask", "--data-dir", dirs[0], "--payload", `{"required":{}}`, "--deadline", "3s", "--max", "1", "-o", "json")
		if code != 0 {
			t.Logf("ask: exit %d, %s", code, errOut)
			return false
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("ask -o json: %v: %s", err, out)
		}
		return len(res.Answers) == 1
	})
	if res.Answers[0].AgentID != "test:cli:agent1" || res.Answers[0].Status != "accepted" || res.Ended != "count" {
		t.Fatalf("answer %+v, ended %q", res.Answers[0], res.Ended)
	}
	code, out, errOut := runIn(t, "", "ask", "--data-dir", dirs[0], "--intent", "query", "--deadline", "5s", "--expect", "test:cli:agent1")
	if code != 0 || !strings.Contains(out, "test:cli:agent1") || !strings.Contains(out, "ended expected") {
		t.Fatalf("ask table: exit %d, %s %s", code, out, errOut)
	}
	for _, bad := range [][]string{{"--deadline", "0s"}, {"--intent", "notify"}, {"--max", "-1"}, {"--payload", "[1]"}} {
		code, _, errOut := runIn(t, "", append([]string{"ask", "--data-dir", dirs[0]}, bad...)...)
		if code == 0 || errOut == "" {
			t.Fatalf("ask %v: exit %d, %q; want a refusal", bad, code, errOut)
		}
	}
}
