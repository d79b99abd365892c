package coord_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// exampleMesh starts n nodes on an in-memory network: node 0 is the caller, nodes 1..n-1 are
// "demo:example:agentI" and answer a query {"n": x} with {"n": x+1, "by": name}. It returns
// node 0 and a function that stops everything.
func exampleMesh(n int) (*node.Node, func()) {
	mn := mocknet.New()
	var nodes []*node.Node
	stop := func() {
		for _, nd := range nodes {
			nd.Close()
		}
		mn.Close()
	}
	for i := range n {
		sk, _, _ := crypto.GenerateEd25519Key(nil)
		h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 9100+i)))
		if err != nil {
			panic(err)
		}
		name := fmt.Sprintf("demo:example:agent%d", i)
		nd, err := node.New(node.WithHost(h, sk), node.WithAgent(name, protocol.Manifest{Tools: []string{"adder"}}),
			node.WithDurable(false), node.WithAudit(false, false), node.WithDiscovery(false), node.WithGossip(false),
			node.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			panic(err)
		}
		nodes = append(nodes, nd)
		nd.Handle(protocol.IntentQuery, func(_ context.Context, r *node.Request) error {
			var in struct{ N int }
			_ = json.Unmarshal(r.Msg.Message.Payload, &in)
			return r.Reply(protocol.ResponseAccepted, map[string]any{"n": in.N + 1, "by": name})
		})
	}
	_ = mn.LinkAll()
	_ = mn.ConnectAllButSelf()
	for i, a := range nodes {
		for j, b := range nodes {
			if i != j {
				a.AddPeer(b.AgentID(), peer.AddrInfo{ID: b.ID(), Addrs: b.ListenAddrs()})
			}
		}
	}
	return nodes[0], stop
}

// adders is a static directory: agents 1 and 2 provide tool:adder (without it, discovery).
func adders(context.Context, coord.Capability) ([]string, error) {
	return []string{"demo:example:agent1", "demo:example:agent2"}, nil
}

// Ask "an agent with tool adder", with up to 3 attempts on a retryable error.
func ExampleCoordinator_AnyOf() {
	n, stop := exampleMesh(3)
	defer stop()
	c, err := coord.New(n, coord.WithCandidates(adders))
	if err != nil {
		panic(err)
	}
	ask := coord.Ask{Intent: protocol.IntentQuery, Payload: json.RawMessage(`{"n":41}`)}
	res, err := c.AnyOf(context.Background(), coord.Capability{Kind: "tool", Name: "adder"}, ask,
		coord.CallOptions{Timeout: 5 * time.Second, Retry: coord.RetryPolicy{Attempts: 3}})
	if err != nil {
		panic(err)
	}
	var out struct{ N int }
	_ = json.Unmarshal(res.Response.Message.Payload, &out)
	fmt.Println(out.N, len(res.Tried))
	// Output: 42 0
}

// Scatter to every adder and return at the first answer; the other request is cancelled.
func ExampleCoordinator_Scatter() {
	n, stop := exampleMesh(3)
	defer stop()
	c, _ := coord.New(n, coord.WithCandidates(adders))
	ask := coord.Ask{Intent: protocol.IntentQuery, Payload: json.RawMessage(`{"n":1}`)}
	g, err := c.Scatter(context.Background(), coord.Targets{Capability: &coord.Capability{Kind: "tool", Name: "adder"}}, ask,
		coord.ScatterOptions{Completion: coord.FirstK, K: 1, Deadline: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Met, len(g.Answers), len(g.Answers)+len(g.Cancelled))
	// Output: true 1 2
}

// A pipeline: agent 1 adds one, then agent 2 adds one to agent 1's result.
func ExampleCoordinator_Pipeline() {
	n, stop := exampleMesh(3)
	defer stop()
	c, _ := coord.New(n)
	res, err := c.Pipeline(context.Background(), "chain-1", json.RawMessage(`{"n":1}`), []coord.Step{
		{Name: "first", Agent: "demo:example:agent1", Intent: protocol.IntentQuery},
		{Name: "second", Agent: "demo:example:agent2", Intent: protocol.IntentQuery},
	}, coord.CallOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.CorrelationID, string(res.Output))
	// Output: chain-1 {"by":"demo:example:agent2","n":3,"status":"accepted"}
}

// A circuit opens after its threshold of failures; then calls fail at once.
func ExampleCoordinator_Call() {
	n, stop := exampleMesh(1)
	defer stop()
	c, _ := coord.New(n, coord.WithBreaker(2, time.Minute, 1))
	ask := coord.Ask{Intent: protocol.IntentQuery}
	for range 2 { // nobody serves demo:example:ghost: AGENT_NOT_FOUND, a failure
		c.Call(context.Background(), "demo:example:ghost", ask, coord.CallOptions{})
	}
	a := c.Call(context.Background(), "demo:example:ghost", ask, coord.CallOptions{})
	b, _ := c.Breaker("demo:example:ghost")
	fmt.Println(a.Code(), errors.Is(a.Err, coord.ErrCircuitOpen), b.State)
	// Output: AGENT_NOT_FOUND true open
}
