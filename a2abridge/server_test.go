package a2abridge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacyclient "github.com/a2aproject/a2a-go/a2aclient"
	legacycard "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

func TestMain(m *testing.M) {
	testsupport.VerifyTestMain(m, testsupport.MocknetPipes(), testsupport.ProcessWorkers())
}

const (
	asker      = "test:a2a:asker"
	summariser = "test:a2a:summariser"
)

// meshNode is one node of a test mesh, with its local API.
type meshNode struct {
	n   *node.Node
	c   *apiclient.Client
	srv *api.Server
	key crypto.PrivKey
}

// mesh starts two mocknet nodes with discovery and gossip, node 1 joining through node 0,
// each with its local API. Node 1's agent, the summariser, offers the tool "summarise" in the
// domain "docs": a handoff is answered at once with a summary of its text; the intent
// x-slow first with a pending response (progress 0.5), then accepted. extra options apply to
// both nodes.
func mesh(t testing.TB, firstPort int, extra ...node.Option) [2]meshNode {
	t.Helper()
	net := testsupport.Mocknet(t, 2, testsupport.FirstPort(firstPort), testsupport.LinkOnly())
	var out [2]meshNode
	var boot string
	for i := range 2 {
		dir := t.TempDir()
		man := protocol.Manifest{Tools: []string{[]string{"chat", "summarise"}[i]}, Domains: []string{"docs"}}
		opts := []node.Option{node.WithHost(net.Hosts[i], net.Keys[i]), node.WithDataDir(dir), node.WithInbox(true),
			node.WithAgent([]string{asker, summariser}[i], man),
			node.WithLogger(slog.New(slog.DiscardHandler)), node.WithHeartbeatInterval(time.Second)}
		opts = append(opts, extra...)
		if i > 0 {
			opts = append(opts, node.WithBootstrap(boot))
		}
		nd, err := node.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			boot = nd.Addrs()[0].String()
		} else {
			summarise(nd)
		}
		srv, err := api.New(nd, api.WithListen("127.0.0.1:0"), api.WithDataDir(dir), api.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		c := apiclient.New(srv.Addr(), srv.Token())
		t.Cleanup(func() { c.Close(); srv.Close(); nd.Close() })
		out[i] = meshNode{n: nd, c: c, srv: srv, key: net.Keys[i]}
	}
	return out
}

// summarise registers the summariser's handlers on n.
func summarise(n *node.Node) {
	n.Handle(protocol.IntentHandoff, func(_ context.Context, r *node.Request) error {
		var in struct {
			Text string `json:"text"`
		}
		if err := protocol.DecodePayload(r.Msg, &in); err != nil {
			return err
		}
		return r.Reply(protocol.ResponseAccepted, map[string]any{"summary": "short: " + in.Text})
	})
	n.Handle("x-slow", func(_ context.Context, r *node.Request) error {
		if err := r.Reply(protocol.ResponsePending, map[string]any{"progress": 0.5}); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		return r.Reply(protocol.ResponseAccepted, map[string]any{"summary": "slowly"})
	})
}

// bridge serves the inbound bridge of m's node 0 on a loopback httptest server, with the
// node's API token and its key; it returns the server and an HTTP client that sends the token.
func bridge(t testing.TB, m [2]meshNode) (*httptest.Server, *http.Client) {
	t.Helper()
	// Wait outlasts the node's lookup of an unknown recipient (5 s), which a loaded machine may need.
	b, err := NewServer(m[0].c, Options{Token: m[0].srv.Token(), Key: m[0].key, Wait: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Handler())
	hc := &http.Client{Transport: bearer{token: m[0].srv.Token(), rt: &http.Transport{}}}
	t.Cleanup(func() { hs.Close(); b.Close(); hc.CloseIdleConnections() })
	return hs, hc
}

// bearer adds the token to every request.
type bearer struct {
	token string
	rt    *http.Transport
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func (b bearer) CloseIdleConnections() { b.rt.CloseIdleConnections() }

// client resolves the card under base and returns an A2A 1.0 client of it, over protocol.
func client(t testing.TB, hc *http.Client, base string, protocol a2a.TransportProtocol) (*a2aclient.Client, *a2a.AgentCard) {
	t.Helper()
	ctx := context.Background()
	var card *a2a.AgentCard
	testsupport.WaitFor(t, 30*time.Second, "the card of "+base, func() bool {
		var err error
		card, err = agentcard.NewResolver(hc).Resolve(ctx, base)
		return err == nil
	})
	cl, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{protocol}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Destroy() })
	return cl, card
}

func agentURL(base, agent string) string { return base + AgentsPrefix + url.PathEscape(agent) }

// Inbound: A2A clients fetch the card of a mesh agent and of the node's own agent from the
// bridge, send each a message, and get a completed task whose artifact is the agent's answer:
// A2A 1.0 clients over JSON-RPC and over HTTP+JSON, and an A2A 0.3 client (the 0.3 SDK,
// reading the same card's 0.3 members). The card's signature verifies.
func TestServer_A2AClientsReachAMeshAgentAndTheOwnAgent(t *testing.T) {
	m := mesh(t, 7400)
	summarise(m[0].n) // the node's own agent answers as the summariser does
	hs, hc := bridge(t, m)
	ctx := context.Background()
	for _, base := range []string{agentURL(hs.URL, summariser), hs.URL} {
		for _, tp := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
			cl, card := client(t, hc, base, tp)
			if id, err := VerifyCard(card); err != nil || id != m[0].n.ID() {
				t.Fatalf("card signature: %v %s", err, id)
			}
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("a long text"), a2a.NewDataPart(map[string]any{"lang": "en"}))
			res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
			if err != nil {
				t.Fatalf("%s over %s: %v", base, tp, err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 {
				t.Fatalf("%s over %s: result %#v", base, tp, res)
			}
			if got := PayloadOf(task.Artifacts[0].Parts); got["summary"] != "short: a long text" || got["status"] != "accepted" {
				t.Fatalf("%s over %s: artifact %v", base, tp, got)
			}
		}
		legacyAsk(t, hc, base)
	}
	_, card := client(t, hc, agentURL(hs.URL, summariser), a2a.TransportProtocolJSONRPC)
	if card.Skills[0].ID != "summarise" || card.Skills[0].Tags[0] != "docs" || len(card.SupportedInterfaces) != 3 ||
		!strings.HasSuffix(card.SupportedInterfaces[0].URL, "/agents/test:a2a:summariser/") || card.SecurityRequirements == nil {
		t.Fatalf("card %+v", card)
	}
}

// legacyAsk has an A2A 0.3 client (a2a-go v0.3) read the card under base and send a message.
func legacyAsk(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	ctx := context.Background()
	card, err := legacycard.NewResolver(hc).Resolve(ctx, base)
	if err != nil || !strings.HasPrefix(string(card.ProtocolVersion), "0.3") || card.URL == "" {
		t.Fatalf("the 0.3 card under %s: %v %+v", base, err, card)
	}
	cl, err := legacyclient.NewFromCard(ctx, card, legacyclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Destroy()
	res, err := cl.SendMessage(ctx, &legacy.MessageSendParams{Message: legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: "old"})})
	if err != nil {
		t.Fatalf("a 0.3 client: %v", err)
	}
	task, ok := res.(*legacy.Task)
	if !ok || task.Status.State != legacy.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("a 0.3 client: result %#v", res)
	}
}

// An agent the mesh does not know has no card, and a call to it fails at once (once the node
// has settled in the mesh: here, once it found the summariser), its task failed with
// AGENT_NOT_FOUND.
func TestServer_UnknownAgentFailsAtOnce(t *testing.T) {
	m := mesh(t, 7450)
	hs, hc := bridge(t, m)
	ctx := context.Background()
	testsupport.WaitFor(t, 10*time.Second, "the node settled in the mesh (the DHT's not-found is its answer)", func() bool {
		_, err := m[0].n.Resolve(ctx, "test:a2a:nobody")
		return errors.Is(err, discovery.ErrNoRecord)
	})
	resp, err := hc.Get(agentURL(hs.URL, "test:a2a:nobody") + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the card of nobody: %s", resp.Status)
	}
	nobody, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(agentURL(hs.URL, "test:a2a:nobody")+"/", a2a.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer nobody.Destroy()
	res, err := nobody.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
	if err != nil {
		t.Fatal(err)
	}
	task, _ := res.(*a2a.Task)
	if task == nil || task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil {
		t.Fatalf("call to nobody: %#v", res)
	}
	if code := PayloadOf(task.Status.Message.Parts)["code"]; code != "AGENT_NOT_FOUND" {
		t.Fatalf("call to nobody failed with %v", code)
	}
}

// JSON-RPC calls of another A2A version, or of no A2A method, get an error that says so.
func TestServer_VersionAndMethodErrors(t *testing.T) {
	m := mesh(t, 7460)
	hs, hc := bridge(t, m)
	call := func(method, version string) map[string]any {
		req, _ := http.NewRequest("POST", hs.URL+"/", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Error map[string]any `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out.Error
	}
	if e := call("SendMessage", "2.0"); e["code"] != float64(-32009) || !strings.Contains(e["message"].(string), "speaks A2A 1.0") {
		t.Fatalf("a version the bridge does not speak: %v", e)
	}
	if e := call("message/send", "1.0"); e["code"] != float64(-32009) {
		t.Fatalf("a 0.3 method sent as 1.0: %v", e)
	}
	if e := call("frobnicate", ""); e["code"] != float64(-32601) || !strings.Contains(e["message"].(string), "SendMessage") {
		t.Fatalf("no A2A method: %v", e)
	}
}

// Streaming a call that answers pending first: the stream shows the working update with the
// progress, then the task completed with the answer as its artifact.
func TestServer_StreamShowsProgress(t *testing.T) {
	m := mesh(t, 7410)
	hs, hc := bridge(t, m)
	cl, _ := client(t, hc, agentURL(hs.URL, summariser), a2a.TransportProtocolJSONRPC)
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
	msg.Metadata = map[string]any{IntentKey: "x-slow"}
	var states []string
	var progress, summary any
	for ev, err := range cl.SendStreamingMessage(context.Background(), &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			states = append(states, stateName(ev.Status.State))
			if len(ev.Artifacts) == 1 {
				summary = PayloadOf(ev.Artifacts[0].Parts)["summary"]
			}
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, stateName(ev.Status.State))
			if ev.Status.Message != nil && progress == nil {
				progress = PayloadOf(ev.Status.Message.Parts)["progress"]
			}
		case *a2a.TaskArtifactUpdateEvent:
			states = append(states, "artifact")
			summary = PayloadOf(ev.Artifact.Parts)["summary"]
		}
	}
	if got := strings.Join(states, ","); !strings.HasSuffix(got, "working,working,completed") || progress != 0.5 || summary != "slowly" {
		t.Fatalf("stream %s, progress %v, summary %v", got, progress, summary)
	}
}

// The bridge asks calls for the token; cards and the key set are public.
func TestServer_CallsNeedTheToken(t *testing.T) {
	m := mesh(t, 7420)
	hs, _ := bridge(t, m)
	resp, err := http.Post(hs.URL+"/", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a call without the token: %s", resp.Status)
	}
	for _, path := range []string{"/.well-known/agent-card.json", JWKSPath} {
		resp, err = http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
