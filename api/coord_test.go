package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// coordMesh is 4 API nodes whose node 0's coordinator finds agents 1..3 for tool:terminal,
// opens a circuit after 2 failures, and whose agents answer queries in Go: agent 1 fails with
// INTERNAL_ERROR while failing is set, the others answer {"by": name, "n": n+1}.
func coordMesh(t *testing.T, failing *atomic.Bool) *apiMesh {
	t.Helper()
	src := func(context.Context, coord.Capability) ([]string, error) {
		return []string{agentName(1), agentName(2), agentName(3)}, nil
	}
	m := newAPIMesh(t, 4, meshOpts{server: func(i int) []Option {
		if i != 0 {
			return nil
		}
		return []Option{WithCoordOptions(coord.WithCandidates(src), coord.WithBreaker(2, time.Hour, 1))}
	}})
	for i := 1; i < 4; i++ {
		m.nodes[i].Handle(protocol.IntentQuery, func(_ context.Context, r *node.Request) error {
			if i == 1 && failing.Load() {
				return r.Fail(protocol.Errorf(protocol.CodeInternalError, "broken"))
			}
			var in struct{ N float64 }
			_ = json.Unmarshal(r.Msg.Message.Payload, &in)
			return r.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i), "n": in.N + 1})
		})
	}
	return m
}

func TestCoord_AnyFallbackScatterPipelineOverHTTP(t *testing.T) {
	var failing atomic.Bool
	m := coordMesh(t, &failing)
	c := m.clients[0]
	ctx := testCtx(t, 30*time.Second)
	tool := &coord.Capability{Kind: "tool", Name: "terminal"}

	res, err := CoordAny(ctx, c, CoordRequest{Capability: tool, Intent: protocol.IntentQuery, Payload: json.RawMessage(`{"n":1}`)}, 10*time.Second)
	if err != nil || res.Response == nil || !strings.HasPrefix(res.AgentID, "test:api:agent") {
		t.Fatalf("any: %+v, %v", res, err)
	}
	failing.Store(true)
	res, err = CoordFallback(ctx, c, CoordRequest{Agents: []string{agentName(1), agentName(3)}, Intent: protocol.IntentQuery}, 10*time.Second)
	if err != nil || res.AgentID != agentName(3) || len(res.Tried) != 1 || res.Tried[0].Code != protocol.CodeInternalError {
		t.Fatalf("fallback: %+v, %v", res, err)
	}
	g, err := CoordScatter(ctx, c, CoordRequest{Agents: []string{agentName(1), agentName(2), agentName(3)}, Intent: protocol.IntentQuery, Completion: "all"}, 10*time.Second)
	if err != nil || g.Met || len(g.Answers) != 2 || len(g.Errors[protocol.CodeInternalError]) != 1 || g.Error == nil {
		t.Fatalf("scatter: %+v, %v", g, err)
	}
	p, err := CoordPipeline(ctx, c, PipelineRequest{Input: json.RawMessage(`{"n":1}`), Steps: []coord.Step{
		{Agent: agentName(2), Intent: protocol.IntentQuery},
		{Capability: tool, Intent: protocol.IntentQuery},
	}}, 10*time.Second)
	if err != nil || p.Error != nil || len(p.Steps) != 2 || !strings.Contains(string(p.Output), `"n":3`) {
		t.Fatalf("pipeline: %+v, %v", p, err)
	}
	var ae *apiclient.APIError
	if _, err := CoordAny(ctx, c, CoordRequest{Agents: []string{agentName(1)}, Intent: protocol.IntentQuery}, 0); !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("any with agents: %v, want 400", err)
	}
	if _, err := CoordScatter(ctx, c, CoordRequest{Agents: []string{agentName(1)}, Intent: protocol.IntentQuery, Deadline: "soon"}, 0); !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("bad deadline: %v, want 400", err)
	}
}

// The breaker of agent 1 opens after 2 failures: /v1/agents lists it, /metrics counts it,
// the event stream carries the transition, and a call to it fails at once with 404
// AGENT_NOT_FOUND and Retry-After.
func TestCoord_BreakerIsVisible(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	m := coordMesh(t, &failing)
	c := m.clients[0]
	ctx := testCtx(t, 30*time.Second)
	items := breakerEvents(t, ctx, m.servers[0])
	one := CoordRequest{Agents: []string{agentName(1)}, Intent: protocol.IntentQuery}
	for range 2 {
		if _, err := CoordFallback(ctx, c, one, 10*time.Second); protocol.CodeOf(err) != protocol.CodeInternalError {
			t.Fatalf("%v, want INTERNAL_ERROR", err)
		}
	}
	var ae *apiclient.APIError
	_, err := CoordFallback(ctx, c, one, 10*time.Second)
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code() != string(protocol.CodeAgentNotFound) {
		t.Fatalf("open circuit: %v, want 404 AGENT_NOT_FOUND", err)
	}
	select {
	case it := <-items:
		if it.Breaker == nil || it.AgentID != agentName(1) || it.Breaker.To != coord.Open {
			t.Fatalf("event %+v, want agent 1's circuit opening", it)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no breaker event")
	}
	doc, err := c.Agents(ctx)
	if err != nil || len(doc.Breakers) != 1 || doc.Breakers[0].AgentID != agentName(1) || doc.Breakers[0].State != string(coord.Open) {
		t.Fatalf("agents: %+v, %v", doc.Breakers, err)
	}
	resp, err := http.Get(m.servers[0].URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`iacp_coord_breakers{state="open"} 1`, "iacp_coord_breaker_opened_total 1", "iacp_coord_breaker_refused_total 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// breakerEvents opens srv's event stream for breaker transitions and returns once the server
// answered with its headers, which it sends only after it subscribed: every transition from
// then on arrives on the channel. The stream ends with the test.
func breakerEvents(t *testing.T, ctx context.Context, srv *Server) <-chan EventItem {
	t.Helper()
	sctx, stop := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL()+"/v1/events?kinds="+KindBreaker, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+srv.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		stop()
		t.Fatalf("event stream: %v %v", resp, err)
	}
	items := make(chan EventItem, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var it EventItem
			if json.Unmarshal([]byte(data), &it) == nil {
				select {
				case items <- it:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { stop(); resp.Body.Close(); <-done })
	return items
}
