package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// fussyAgent is a webhook agent that refuses (503) every message whose payload says
// "fail" until it recovers, and takes the others (202). It counts, by message id, the posts
// it refused and took.
type fussyAgent struct {
	srv       *httptest.Server
	mu        sync.Mutex
	recovered bool
	refused   map[string]int
	taken     map[string]int
}

func newFussyAgent(t *testing.T) *fussyAgent {
	a := &fussyAgent{refused: map[string]int{}, taken: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		m, err := protocol.DecodeJSON(raw)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if strings.Contains(string(m.Message.Payload), "fail") && !a.recovered {
			a.refused[m.Envelope.MessageID]++
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		a.taken[m.Envelope.MessageID]++
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fussyAgent) URL() string { return a.srv.URL + MessagePath }

func (a *fussyAgent) counts(id string) (refused, taken int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused[id], a.taken[id]
}

func (a *fussyAgent) recover() { a.mu.Lock(); a.recovered = true; a.mu.Unlock() }

// A message the agent keeps refusing holds up no other: the others arrive while it fails. It
// is posted again and again, far beyond the 12 attempts after which the webhook used to give
// up for good, and arrives once the agent recovers. Every message is taken exactly once.
func TestWebhook_RetriesAFailingMessageUntilTakenWithoutHoldingUpOthers(t *testing.T) {
	agent := newFussyAgent(t)
	m := newAPIMesh(t, 2, meshOpts{server: func(i int) []Option {
		if i != 1 {
			return nil
		}
		return []Option{WithWebhook(agent.URL(), ""), WithWebhookBackoff(time.Millisecond, 10*time.Millisecond)}
	}})
	ctx := testCtx(t, 60*time.Second)
	send := func(payload string) string {
		res, err := m.clients[0].Send(ctx, request(agentName(1), protocol.IntentNotify, payload))
		if err != nil {
			t.Fatal(err)
		}
		return res.MessageID
	}
	failing := send(`{"fail":true}`)
	var others []string
	for i := 0; i < 3; i++ {
		others = append(others, send(`{"n":1}`))
	}
	testsupport.WaitFor(t, 20*time.Second, "the other messages taken while the first fails", func() bool {
		for _, id := range others {
			if _, taken := agent.counts(id); taken == 0 {
				return false
			}
		}
		return true
	})
	if refused, taken := agent.counts(failing); refused == 0 || taken != 0 {
		t.Fatalf("the failing message: refused %d, taken %d; want refused and not taken yet", refused, taken)
	}
	testsupport.WaitFor(t, 20*time.Second, "the failing message posted far beyond 12 attempts", func() bool {
		refused, _ := agent.counts(failing)
		return refused >= 50
	})
	agent.recover()
	testsupport.WaitFor(t, 20*time.Second, "the failing message taken after the agent recovered", func() bool {
		_, taken := agent.counts(failing)
		return taken == 1 && m.nodes[1].Inbox().Len() == 0
	})
	for _, id := range append(others, failing) {
		if _, taken := agent.counts(id); taken != 1 {
			t.Fatalf("message %s taken %d times, want once", id, taken)
		}
	}
}

// A message that expires before the agent takes it is acknowledged as expired: it leaves the
// inbox without the agent ever taking it.
func TestWebhook_AcknowledgesAnExpiredMessage(t *testing.T) {
	agent := newFussyAgent(t)
	m := newAPIMesh(t, 2, meshOpts{server: func(i int) []Option {
		if i != 1 {
			return nil
		}
		return []Option{WithWebhook(agent.URL(), ""), WithWebhookBackoff(time.Millisecond, 50*time.Millisecond)}
	}})
	ctx := testCtx(t, 30*time.Second)
	msg, err := m.nodes[0].Builder().Request(agentName(1), protocol.IntentNotify, json.RawMessage(`{"fail":true}`), protocol.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.nodes[0].Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "the message posted and refused", func() bool {
		refused, _ := agent.counts(msg.Envelope.MessageID)
		return refused > 0
	})
	testsupport.WaitFor(t, 20*time.Second, "the expired message gone from the inbox", func() bool { return m.nodes[1].Inbox().Len() == 0 })
	if refused, taken := agent.counts(msg.Envelope.MessageID); refused == 0 || taken != 0 {
		t.Fatalf("refused %d, taken %d; want posted, refused, never taken", refused, taken)
	}
	if m.nodes[1].Now().Before(msg.Expires()) {
		t.Fatal("the message left the inbox before it expired")
	}
}
