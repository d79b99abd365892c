package node_test

import (
	"context"
	"fmt"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// A broadcast query: ask the agents with the capability "summarise" to take a document,
// collect up to three answers within two seconds, and see who answered what and who did not.
// A member answers in its handler as it answers any request. (Compiled, not run: it needs a
// mesh.)
func ExampleNode_Ask() {
	// A member, started with the capability and gossip on (the default).
	member, err := node.New(node.WithDataDir("member"),
		node.WithAgent("acme:a:summariser", protocol.Manifest{Tools: []string{"summarise"}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer member.Close()
	member.Handle(protocol.IntentHandoff, func(_ context.Context, r *node.Request) error {
		return r.Reply(protocol.ResponseAccepted, map[string]any{"summary": "..."})
	})

	// The asker, on another machine of the same mesh.
	asker, err := node.New(node.WithDataDir("asker"), node.WithAgent("acme:b:coordinator", protocol.Manifest{}),
		node.WithBootstrap("/ip4/192.0.2.1/tcp/4001/p2p/12D3KooW..."))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer asker.Close()
	res, err := asker.Ask(context.Background(), node.AskOptions{
		Group:    "summarise",
		Intent:   protocol.IntentHandoff,
		Payload:  map[string]any{"doc": "a.md"},
		Deadline: 2 * time.Second,
		Count:    3,
	})
	if err != nil {
		fmt.Println("query failed:", err)
		return
	}
	for _, a := range res.Answers {
		fmt.Println(a.AgentID, a.Status, a.Latency, string(a.Payload))
	}
	for _, e := range res.Errors {
		fmt.Println(e.AgentID, e.Code, e.Message)
	}
	fmt.Println("ended on", res.Ended)
}
