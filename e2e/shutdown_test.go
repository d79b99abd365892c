package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// IaCP 1.0 section 5.3.3: SIGTERM stops a node cleanly (exit 0), and its peers see its agent
// go offline rather than waiting to suspect it.
func TestGracefulStop_PeersSeeAgentOffline(t *testing.T) {
	a, b := pair(t)
	b.stop()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		_, body, err := a.do("GET", "/v1/agents", nil)
		if err == nil {
			var r struct {
				Agents []struct {
					AgentID string `json:"agent_id"`
					State   string `json:"state"`
				} `json:"agents"`
			}
			_ = json.Unmarshal(body, &r)
			for _, ag := range r.Agents {
				if ag.AgentID == "e2e:lab:bob" && ag.State == "offline" {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, body, _ := a.do("GET", "/v1/agents", nil)
	t.Fatalf("bob never seen offline after a clean stop: %s", body)
}
