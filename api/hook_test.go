package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// hookAgent is an agent that is an HTTP server: it fails its first `failures` calls with 503,
// then answers requests with a response document (200).
type hookAgent struct {
	srv      *httptest.Server
	failures int64
	calls    atomic.Int64
	badAuth  atomic.Int64
}

func newHookAgent(t *testing.T, failures int64) *hookAgent {
	h := &hookAgent{failures: failures}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer hook-secret" {
			h.badAuth.Add(1)
		}
		raw, _ := io.ReadAll(r.Body)
		if n <= h.failures {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		req, err := protocol.DecodeJSON(raw)
		if err != nil || req.Message.Type != protocol.TypeRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		out := map[string]any{
			"envelope": map[string]any{"correlation_id": req.Envelope.MessageID,
				"recipient": map[string]any{"agent_id": req.Envelope.Sender.AgentID}},
			"message": map[string]any{"type": "response", "intent": req.Message.Intent,
				"payload": map[string]any{"status": "accepted", "detail": "from-hook"}},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookAgent) URL() string { return h.srv.URL + MessagePath }
