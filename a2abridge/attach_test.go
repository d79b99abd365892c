package a2abridge

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacysrv "github.com/a2aproject/a2a-go/a2asrv"
	legacyqueue "github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// translator is a small A2A 1.0 agent: it answers a message with a completed task whose
// artifact is its text in upper case; "refuse" fails the task, "wait" asks for input.
type translator struct{}

func (translator) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text, _ := PayloadOf(ec.Message.Parts)["text"].(string)
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		not := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("not this one"))
		switch text {
		case "refuse":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, not), nil)
		case "wait":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, not), nil)
		default:
			if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(strings.ToUpper(text)), a2a.NewDataPart(map[string]any{"lang": "shout"})), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
			}
		}
	}
}

func (translator) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// legacyTranslator is the same agent on the A2A 0.3 SDK (a2a-go v0.3).
type legacyTranslator struct{}

func (legacyTranslator) Execute(ctx context.Context, rc *legacysrv.RequestContext, q legacyqueue.Queue) error {
	var text string
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(legacy.TextPart); ok {
			text = tp.Text
		}
	}
	state := legacy.TaskStateCompleted
	switch text {
	case "refuse":
		state = legacy.TaskStateFailed
	case "wait":
		state = legacy.TaskStateInputRequired
	default:
		ev := legacy.NewArtifactEvent(rc, legacy.TextPart{Text: strings.ToUpper(text)}, legacy.DataPart{Data: map[string]any{"lang": "shout"}})
		if err := q.Write(ctx, ev); err != nil {
			return err
		}
	}
	var msg *legacy.Message
	if state != legacy.TaskStateCompleted {
		msg = legacy.NewMessageForTask(legacy.MessageRoleAgent, rc, legacy.TextPart{Text: "not this one"})
	}
	ev := legacy.NewStatusUpdateEvent(rc, state, msg)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (legacyTranslator) Cancel(ctx context.Context, rc *legacysrv.RequestContext, q legacyqueue.Queue) error {
	return q.Write(ctx, legacy.NewStatusUpdateEvent(rc, legacy.TaskStateCanceled, nil))
}

var shoutSkill = a2a.AgentSkill{ID: "shout", Name: "shout", Description: "upper-case a text", Tags: []string{"text", "model:caps-1"}}

// a2aAgent serves the translator on A2A 1.0 (JSON-RPC) on a loopback httptest server and
// returns the URL its card is under.
func a2aAgent(t testing.TB) string {
	t.Helper()
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	card := &a2a.AgentCard{Name: "Shouter", Description: "upper-cases text", Version: "1.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(hs.URL+"/invoke", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}, Skills: []a2a.AgentSkill{shoutSkill}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(translator{}, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	t.Cleanup(hs.Close)
	return hs.URL
}

// legacyAgent serves the translator on A2A 0.3, with the 0.3 SDK and a 0.3 card.
func legacyAgent(t testing.TB) string {
	t.Helper()
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	card := &legacy.AgentCard{Name: "Shouter", Description: "upper-cases text", URL: hs.URL + "/invoke",
		PreferredTransport: legacy.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0", Version: "1.0",
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []legacy.AgentSkill{{ID: "shout", Name: "shout", Description: "upper-case a text", Tags: []string{"text", "model:caps-1"}}}}
	mux.Handle("/invoke", legacysrv.NewJSONRPCHandler(legacysrv.NewHandler(legacyTranslator{}, legacysrv.WithLogger(slog.New(slog.DiscardHandler)))))
	mux.Handle(legacysrv.WellKnownAgentCardPath, legacysrv.NewStaticAgentCardHandler(card))
	t.Cleanup(hs.Close)
	return hs.URL
}

// Outbound: an A2A agent attached to a mocknet mesh is found by its skill and answers a mesh
// agent's requests: a completed task is the accepted response, a failed task an error, a task
// that needs input a pending response. The agent speaks A2A 1.0 (a 1.0 card) or 0.3 (a 0.3
// card, the 0.3 SDK).
func TestAttach_MeshAgentReachesAnA2AAgent(t *testing.T) {
	t.Run("a2a-1.0", func(t *testing.T) { attachAndAsk(t, a2aAgent(t), 7430) })
	t.Run("a2a-0.3", func(t *testing.T) { attachAndAsk(t, legacyAgent(t), 7440) })
}

func attachAndAsk(t *testing.T, base string, port int) {
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	card, err := FetchCard(ctx, base, hc)
	if err != nil {
		t.Fatal(err)
	}
	net := testsupport.Mocknet(t, 2, testsupport.FirstPort(port), testsupport.LinkOnly())
	quiet := node.WithLogger(slog.New(slog.DiscardHandler))
	asker, err := node.New(node.WithHost(net.Hosts[0], net.Keys[0]), node.WithDataDir(t.TempDir()), quiet,
		node.WithAgent("test:a2a:asker", protocol.Manifest{Tools: []string{"chat"}}), node.WithHeartbeatInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()
	att, err := Attach(ctx, card, AttachOptions{Wait: 5 * time.Second}, node.WithHost(net.Hosts[1], net.Keys[1]),
		node.WithDataDir(t.TempDir()), quiet, node.WithHeartbeatInterval(time.Second), node.WithBootstrap(asker.Addrs()[0].String()))
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	id := att.Node().AgentID()
	if id != DefaultAgentID(card) || !strings.HasPrefix(id, "a2a:127.0.0.1:shouter") {
		t.Fatalf("agent id %s", id)
	}
	if m := att.Node().Manifest(); m.Tools[0] != "shout" || m.Domains[0] != "text" || m.Models[0] != "caps-1" {
		t.Fatalf("manifest %+v", m)
	}

	testsupport.WaitFor(t, 30*time.Second, "discovery finds the shouter by its skill", func() bool {
		ms, err := asker.Query(ctx, protocol.CapabilityQuery{Required: protocol.CapabilitySet{Tools: []string{"shout"}}})
		return err == nil && len(ms) == 1 && ms[0].Record.AgentID == id
	})

	ask := func(text string) (*protocol.Message, error) {
		req, err := asker.Builder().Request(id, protocol.IntentHandoff, map[string]any{"text": text, "n": 1})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return asker.Request(rctx, req)
	}
	resp, err := ask("hello")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := decode(resp)
	if p["status"] != "accepted" || p["text"] != "HELLO" || p["lang"] != "shout" {
		t.Fatalf("answer %v", p)
	}
	if _, err := ask("refuse"); !errors.Is(err, protocol.ErrInternal) || !strings.Contains(err.Error(), "not this one") {
		t.Fatalf("a failed task: %v", err)
	}
	resp, err = ask("wait")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := decode(resp); p["status"] != "pending" || p[PayloadKey].(map[string]any)["state"] != "input-required" {
		t.Fatalf("a task that needs input: %v", p)
	}
}

// Cards map to manifests and back: an agent's card through an inbound bridge, attached, has
// the agent's capabilities; a signed card verifies, and a changed one does not.
func TestCard_RoundTripAndSignature(t *testing.T) {
	m := protocol.Manifest{Tools: []string{"summarise", "review"}, Models: []string{"llama3"}, Domains: []string{"docs"}}
	card := CardOf("acme:a:bot", m, "http://127.0.0.1:9701/", "1", "")
	got := ManifestOf("acme:a:bot", card)
	if strings.Join(got.Tools, ",") != "summarise,review" || got.Models[0] != "llama3" || got.Domains[0] != "docs" {
		t.Fatalf("round trip %+v", got)
	}
	net := testsupport.Mocknet(t, 1)
	if err := SignCard(card, net.Keys[0], "http://127.0.0.1:9701"+JWKSPath); err != nil {
		t.Fatal(err)
	}
	if id, err := VerifyCard(card); err != nil || id != net.Hosts[0].ID() {
		t.Fatalf("verify: %v %s", err, id)
	}
	card.Skills[0].ID = "forged"
	if _, err := VerifyCard(card); err == nil {
		t.Fatal("a changed card verified")
	}
}
