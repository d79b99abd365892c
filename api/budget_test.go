package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// A request body is charged to the node-wide budget of messages in flight before it is read,
// as the local agent's share: while that share is spent, a POST waits, and one that cannot get
// room within the read timeout is refused with 429 RATE_LIMITED (retry_after set), its body
// unread; once there is room the same POST is taken. A request without the token is refused
// before anything is charged.
func TestGuard_ABodyWaitsForTheNodesBudget(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{
		node: func(int) []node.Option {
			return []node.Option{func(c *node.Config) error {
				c.QueueStreamBytes, c.QueuePeerBytes, c.QueueTotalBytes = 64<<10, 64<<10, 128<<10
				return nil
			}}
		},
		server: func(int) []Option { return []Option{WithReadTimeout(300 * time.Millisecond)} },
	})
	s := m.servers[0]
	post := func(token string) (int, ErrorDoc) {
		t.Helper()
		body := `{"envelope":{"recipient":{"agent_id":"` + agentName(1) + `"}},"message":{"type":"event","intent":"notify","payload":{"event_type":"x"}}}`
		req, _ := http.NewRequest(http.MethodPost, s.URL()+MessagePath, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var doc ErrorDoc
		_ = json.Unmarshal(raw, &doc)
		return resp.StatusCode, doc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release, err := m.nodes[0].HoldLocal(ctx, 64<<10) // the local agent's whole share
	if err != nil {
		t.Fatal(err)
	}
	if code, doc := post(s.Token()); code != http.StatusTooManyRequests || doc.Error.Code != protocol.CodeRateLimited || doc.Error.RetryAfter <= 0 {
		t.Fatalf("a POST while the local agent's share is spent: %d %+v, want 429 RATE_LIMITED with retry_after", code, doc.Error)
	}
	if code, _ := post("wrong"); code != http.StatusUnauthorized {
		t.Fatalf("a POST without the token: %d, want 401 before anything is charged", code)
	}
	release()
	if code, doc := post(s.Token()); code != http.StatusAccepted {
		t.Fatalf("a POST once there is room: %d %+v, want 202", code, doc.Error)
	}
}
