package e2e

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/iacp-node/iacp-node/a2abridge"
)

// Issue 19: `iacp-node a2a serve` beside a real node. An a2a-go client fetches the node's
// agent's card (signed with the node's key), and a message/send to an agent the mesh does not
// know comes back as a failed task naming the IACP code; SIGTERM stops the bridge cleanly.
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
	if card.Name != "e2e:lab:solo" || card.URL != base+"/" {
		t.Fatalf("card %+v", card)
	}
	if _, err := a2abridge.VerifyCard(card); err != nil {
		t.Fatal(err)
	}

	cl, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: base + "/agents/e2e:lab:nobody/", Transport: a2a.TransportProtocolJSONRPC}},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Destroy()
	res, err := cl.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})})
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
