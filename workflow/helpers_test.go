package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

func agentName(i int) string { return fmt.Sprintf("test:flow:agent%d", i) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startNode starts agent i's node on 127.0.0.1 with its store in dir.
func startNode(t *testing.T, i int, dir string, key crypto.PrivKey) *node.Node {
	t.Helper()
	n, err := node.New(node.WithDataDir(dir), node.WithKey(key), node.WithAgent(agentName(i), protocol.Manifest{Tools: []string{"terminal"}}),
		node.WithNAT(false), node.WithDiscovery(false), node.WithGossip(false), node.WithListen("/ip4/127.0.0.1/tcp/0"),
		node.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newKey(t *testing.T) crypto.PrivKey {
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// workers are agents 1..n: each answers a handoff with {"by": its name, "got": its payload},
// or as answer says, and counts the requests its agent ran, by step.
type workers struct {
	nodes  []*node.Node
	mu     sync.Mutex
	runs   map[string]int // "agent/step" -> times the agent's handler ran it
	answer func(i int, r *node.Request) error
}

func newWorkers(t *testing.T, count int, answer func(i int, r *node.Request) error) *workers {
	w := &workers{runs: map[string]int{}, answer: answer}
	for i := 1; i <= count; i++ {
		n := startNode(t, i, t.TempDir(), newKey(t))
		t.Cleanup(func() { n.Close() })
		n.Handle(protocol.IntentHandoff, func(ctx context.Context, r *node.Request) error {
			var p struct {
				Step string `json:"step"`
			}
			_ = json.Unmarshal(r.Msg.Message.Payload, &p)
			w.mu.Lock()
			w.runs[fmt.Sprintf("%d/%s", i, p.Step)]++
			w.mu.Unlock()
			if w.answer != nil {
				return w.answer(i, r)
			}
			return r.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i), "got": r.Msg.Message.Payload})
		})
		w.nodes = append(w.nodes, n)
	}
	return w
}

func (w *workers) ran(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[key]
}

// introduce tells n where every worker is.
func (w *workers) introduce(n *node.Node) {
	for i, wn := range w.nodes {
		n.AddPeer(agentName(i+1), peer.AddrInfo{ID: wn.ID(), Addrs: wn.ListenAddrs()})
	}
}

// diamond is a → (b, c) → d, each step on its own worker (1 to 4).
func diamond(id string) Spec {
	step := func(name string, agent int, deps ...string) Step {
		return Step{ID: name, Agent: agentName(agent), Payload: json.RawMessage(fmt.Sprintf(`{"step":%q}`, name)), DependsOn: deps, Timeout: Duration(10 * time.Second)}
	}
	return Spec{ID: id, Name: "diamond", Steps: []Step{step("a", 1), step("b", 2, "a"), step("c", 3, "a"), step("d", 4, "b", "c")}}
}
