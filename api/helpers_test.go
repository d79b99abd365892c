package api

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// apiMesh is nodes on one in-memory network, each with its API server on 127.0.0.1:0.
type apiMesh struct {
	nodes   []*node.Node
	servers []*Server
	clients []*apiclient.Client
	dirs    []string
}

var portBase atomic.Int32

func agentName(i int) string { return fmt.Sprintf("test:api:agent%d", i) }

type meshOpts struct {
	node   func(i int) []node.Option // extra node options
	server func(i int) []Option      // extra server options
	mesh   bool                      // discovery and gossip on (slower)
}

func newAPIMesh(t testing.TB, n int, o meshOpts) *apiMesh {
	t.Helper()
	mesh := []testsupport.MeshOption{testsupport.FirstPort(6000 + int(portBase.Add(int32(n))))}
	if o.mesh {
		mesh = append(mesh, testsupport.LinkOnly()) // the nodes join through node 0
	}
	net := testsupport.Mocknet(t, n, mesh...)
	m := &apiMesh{}
	var boot string
	for i := 0; i < n; i++ {
		dir := t.TempDir()
		opts := []node.Option{
			node.WithHost(net.Hosts[i], net.Keys[i]),
			node.WithAgent(agentName(i), protocol.Manifest{Tools: []string{"terminal", fmt.Sprintf("tool%d", i)}}),
			node.WithDataDir(dir),
			node.WithLogger(slog.New(slog.DiscardHandler)),
			node.WithInbox(true),
		}
		if o.mesh {
			opts = append(opts, node.WithHeartbeatInterval(time.Second))
			if i > 0 {
				opts = append(opts, node.WithBootstrap(boot))
			}
		} else {
			opts = append(opts, node.WithDiscovery(false), node.WithGossip(false))
		}
		if o.node != nil {
			opts = append(opts, o.node(i)...)
		}
		nd, err := node.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			boot = nd.Addrs()[0].String()
		}
		sopts := []Option{WithListen("127.0.0.1:0"), WithDataDir(dir), WithLogger(slog.New(slog.DiscardHandler))}
		if o.server != nil {
			sopts = append(sopts, o.server(i)...)
		}
		srv, err := New(nd, sopts...)
		if err != nil {
			nd.Close()
			t.Fatal(err)
		}
		c := apiclient.New(srv.Addr(), srv.Token())
		t.Cleanup(func() { c.Close(); srv.Close(); nd.Close() })
		m.nodes, m.servers, m.clients, m.dirs = append(m.nodes, nd), append(m.servers, srv), append(m.clients, c), append(m.dirs, dir)
	}
	if !o.mesh {
		for i, a := range m.nodes {
			for j, b := range m.nodes {
				if i != j {
					a.AddPeer(agentName(j), peer.AddrInfo{ID: b.ID(), Addrs: b.ListenAddrs()})
				}
			}
		}
	}
	return m
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// request builds an unsigned request from an agent's point of view: what an HTTP agent posts.
func request(to string, intent protocol.Intent, payload string) *apiclient.Message {
	m := &apiclient.Message{}
	m.Envelope.Recipient.AgentID = to
	m.Message.Type = apiclient.TypeRequest
	m.Message.Intent = string(intent)
	m.Message.Payload = []byte(payload)
	return m
}

// wire is m as the client sends it.
func wire(t testing.TB, m *protocol.Message) *apiclient.Message {
	t.Helper()
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	am, err := apiclient.ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	return am
}

// decoded is the document m as the node's own type.
func decoded(t testing.TB, m *apiclient.Message) *protocol.Message {
	t.Helper()
	pm, err := protocol.DecodeJSON(m.Raw)
	if err != nil {
		t.Fatalf("the API answered a message that does not decode: %v", err)
	}
	return pm
}

// answerOnce is a pull-mode agent: it waits for one request in the inbox, answers it with a
// correlated response and acknowledges it.
func answerOnce(ctx context.Context, c *apiclient.Client, me string) error {
	for ctx.Err() == nil {
		doc, err := c.Inbox(ctx, 0, 5*time.Second)
		if err != nil {
			return err
		}
		for _, it := range doc.Messages {
			req := it.Message
			resp := &apiclient.Message{}
			resp.Envelope.Recipient.AgentID = req.Envelope.Sender.AgentID
			resp.Envelope.CorrelationID = req.Envelope.MessageID
			resp.Message.Type = apiclient.TypeResponse
			resp.Message.Intent = req.Message.Intent
			resp.Message.Payload = []byte(`{"status":"accepted","by":"` + me + `"}`)
			if _, err := c.Send(ctx, resp); err != nil {
				return err
			}
			return c.Ack(ctx, req.Envelope.MessageID)
		}
	}
	return ctx.Err()
}
