package e2e

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/iacp-node/iacp-node/a2abridge"
)

// `iacp-node a2a serve` beside a real node. An a2a-go (A2A 1.0) client fetches the node's
// agent's card (signed with the node's key), and a message to an agent the mesh does not know
// comes back as a failed task naming the IACP code; SIGTERM stops the bridge cleanly.
func TestA2A_ServeBesideARealNode(t *testing.T) {
	p := newProc(t, "solo", "e2e:lab:solo")
	p.start()
	defer p.stop()
	port := freePort(t)
	log := &lockedBuffer{}
	cmd := execBinary("a2a", "serve", "--data-dir", p.dir, "--api", fmt.Sprintf("127.0.0.1:%d", p.apiPort),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--wait", "2s")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	hc := &http.Client{Transport: bearer{p.token}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	ctx := context.Background()

	var card *a2a.AgentCard
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if card, err = agentcard.NewResolver(hc).Resolve(ctx, base); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no card: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if card.Name != "e2e:lab:solo" || card.SupportedInterfaces[0].URL != base+"/" {
		t.Fatalf("card %+v", card)
	}
	if _, err := a2abridge.VerifyCard(card); err != nil {
		t.Fatal(err)
	}

	cl, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/agents/e2e:lab:nobody/", a2a.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Destroy()
	res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
	if err != nil {
		t.Fatal(err)
	}
	task, _ := res.(*a2a.Task)
	if task == nil || task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil {
		t.Fatalf("call to nobody: %#v", res)
	}
	if code := a2abridge.PayloadOf(task.Status.Message.Parts)["code"]; code != "AGENT_NOT_FOUND" && code != "TIMEOUT" {
		t.Fatalf("call to nobody failed with %v", code)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("a2a serve did not stop cleanly: %v\n%s", err, log.String())
	}
}

// bearer adds the node's API token to every request, on a transport of its own.
type bearer struct{ token string }

var bearerTransport = &http.Transport{}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return bearerTransport.RoundTrip(r)
}

func (b bearer) CloseIdleConnections() { bearerTransport.CloseIdleConnections() }

// echoAgent is an A2A 1.0 agent for the attach test: it answers every message with a
// completed task whose artifact is the message's text in upper case.
type echoAgent struct{}

func (echoAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text, _ := a2abridge.PayloadOf(ec.Message.Parts)["text"].(string)
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(strings.ToUpper(text))), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
}

func (echoAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// `iacp-node a2a attach --card URL --join TOKEN`, as docs/a2a.md shows it. An A2A 1.0 agent
// (a2a-go's server on loopback) joins a real, certified mesh as an agent of its own, with an
// invitation of the founder: the founder's agent's request to it (the HTTP API, ?wait) comes
// back as the A2A agent's answer. Without --join, attach refuses to start, naming invite and
// --join, rather than come up invisible in open mode.
func TestA2A_AttachJoinsARealMesh(t *testing.T) {
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	defer hs.Close()
	card := &a2a.AgentCard{Name: "Shouter", Description: "upper-cases text", Version: "1.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(hs.URL+"/invoke", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "shout", Name: "shout", Description: "upper-case a text", Tags: []string{"text"}}}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echoAgent{}, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))

	founder := newProc(t, "founder", "e2e:lab:founder")
	founder.start()
	defer founder.stop()
	dir := filepath.Join(t.TempDir(), "shouter")
	out, err := execBinary("a2a", "attach", "--card", hs.URL, "--data-dir", dir, "--bootstrap", founder.peerAddr()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "iacp-node invite") || !strings.Contains(string(out), "--join TOKEN") {
		t.Fatalf("attach without a certificate must refuse, naming invite and --join: %v\n%s", err, out)
	}
	log := &lockedBuffer{}
	cmd := execBinary("a2a", "attach", "--card", hs.URL, "--data-dir", dir, "--join", founder.invite("e2e:lab:shouter"),
		"--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", freePort(t)), "--api", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("a2a attach did not stop cleanly: %v\n%s", err, log.String())
		}
	}()
	req := map[string]any{
		"envelope": map[string]any{"recipient": map[string]any{"agent_id": "e2e:lab:shouter"}},
		"message":  map[string]any{"type": "request", "intent": "handoff", "payload": map[string]any{"text": "hello"}},
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := founder.do("POST", "/.well-known/iacp/v1/message?wait=5s", req)
		if err == nil && code == http.StatusOK {
			if !strings.Contains(string(body), "HELLO") {
				t.Fatalf("the A2A agent's answer: %s", body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer from the attached agent: %d %s %v\n%s", code, body, err, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
