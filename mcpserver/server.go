// Package mcpserver exposes an iacp-node to MCP clients (the Model Context Protocol, which
// LLM applications use to call tools): the agent's node becomes a set of tools (send, request,
// cancel, discover, resolve, agents, broadcast, ask, inbox, outbox) and resources (the agents
// list, the inbox), each input with a plain JSON Schema. It is a client of the node's local API
// (package apiclient, which carries no mesh code: this package builds without go-libp2p), so
// it runs beside `iacp-node run`, over stdio or streamable HTTP (`iacp-node mcp`), and holds
// no state of its own. It starts whether or not the node runs: each call reaches the node
// when it is made, and one made while no node answers fails with an error that says so.
package mcpserver

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iacp-node/iacp-node/apiclient"
)

// Resource URIs.
const (
	// AgentsURI is the agents list (GET /v1/agents).
	AgentsURI = "iacp://agents"
	// InboxURI is the first page of the inbox (GET /v1/inbox), nothing taken.
	InboxURI = "iacp://inbox"
)

// Defaults and bounds of the tools' inputs.
const (
	// DefaultWait is how long request waits for the answer when its input names no wait.
	DefaultWait = 30 * time.Second
	// MaxWait bounds a request's or an inbox read's wait: an MCP call should not hang.
	MaxWait = 5 * time.Minute
)

// Dialer returns a client of the node's local API, or the reason there is none (no node
// runs: an *apiclient.NoNodeError). The server calls it again after a call found no node, so
// that a node started (or restarted on another port) later is found.
type Dialer func() (*apiclient.Client, error)

// Static is the Dialer of one client, whose address does not change.
func Static(c *apiclient.Client) Dialer { return func() (*apiclient.Client, error) { return c, nil } }

// New returns the MCP server of the node that dial reaches; version is the server's version.
func New(dial Dialer, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "iacp-node", Title: "IACP mesh node", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
	t := &tools{dial: dial}
	add(s, "send", "Send a message to an agent of the mesh (no answer awaited): an event, a notification or a request whose answer arrives later in the inbox. The answer's status is accepted (the recipient's node has it) or queued (the agent is known but unreachable now; the node retries, and cancel takes it back).", t.send)
	add(s, "request", "Send a request to an agent of the mesh and wait for its answer (its response payload, or its error code). The request is never delivered after the wait ends.", t.request)
	add(s, "cancel", "Take a queued message (one that send answered queued) out of the node's outbox, so that it is never delivered.", t.cancel)
	add(s, "discover", "Find agents by capability (tools, models, domains) through the mesh's DHT.", t.discover)
	add(s, "resolve", "Look up one agent's record: its peer, addresses and capability manifest.", t.resolve)
	add(s, "agents", "List the agents this node hears heartbeats from, with their state (alive, busy, suspect, offline) and load.", t.agents)
	add(s, "broadcast", "Broadcast an event to every agent of the mesh over gossip.", t.broadcast)
	add(s, "ask", "Ask a capability group, or every agent, over gossip and collect their direct answers within a deadline: each answer, each error by agent, and the expected agents that did not answer.", t.ask)
	add(s, "inbox", "Read the messages waiting for this agent, oldest first; with ack, take each one read so it is not offered again.", t.inbox)
	add(s, "outbox", "List the messages this node still tries to deliver (queued), with their attempts and last error.", t.outbox)
	s.AddResource(&mcp.Resource{URI: AgentsURI, Name: "agents", Title: "Agents of the mesh", MIMEType: "application/json",
		Description: "The agents this node hears, with their liveness state and load."}, t.readAgents)
	s.AddResource(&mcp.Resource{URI: InboxURI, Name: "inbox", Title: "Inbox", MIMEType: "application/json",
		Description: "The first page of messages waiting for this agent (nothing is taken)."}, t.readInbox)
	return s
}

// add registers a tool whose input schema is In's with plain types (schema.go).
func add[In any](s *mcp.Server, name, desc string, h mcp.ToolHandlerFor[In, Output]) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, InputSchema: inputSchema[In]()}, h)
}

const instructions = `This server is an IACP mesh node's agent. Agents are named namespace:host:name.
Use discover or agents to find one, request to ask it and wait for its answer, send for a
message that needs no answer now, and inbox to read (and with ack, take) what others sent.
Errors read "CODE: what happened; what to do".`

// tools holds the handlers; every call goes to the node's local API through the client dial
// gives, kept while it works.
type tools struct {
	dial Dialer
	mu   sync.Mutex
	c    *apiclient.Client // guarded by mu; nil until a call needs it, and after no node answered
}

// client returns the client of the node, dialling it when there is none.
func (t *tools) client() (*apiclient.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c != nil {
		return t.c, nil
	}
	c, err := t.dial()
	if err != nil {
		return nil, err
	}
	t.c = c
	return c, nil
}

// forget drops the client after a call found no node behind it: the next call dials again.
func (t *tools) forget(c *apiclient.Client, err error) {
	var nn *apiclient.NoNodeError
	if !errors.As(err, &nn) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c == c {
		t.c = nil
	}
}

// via runs fn with the node's client and returns its answer as the tool's result.
func via[T any](t *tools, fn func(c *apiclient.Client) (T, error)) (*mcp.CallToolResult, Output, error) {
	c, err := t.client()
	if err != nil {
		return failure(err)
	}
	v, err := fn(c)
	if err != nil {
		t.forget(c, err)
		return failure(err)
	}
	return answer(v)
}

// HTTPHandler serves s over MCP's streamable HTTP transport to clients that present token as
// a bearer token, the node's own API token: the handler reaches the node with that token's
// rights, so it asks for the same.
func HTTPHandler(s *mcp.Server, token string) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="iacp-node mcp"`)
			http.Error(w, "send the node's API token (<data-dir>/api.token) as Authorization: Bearer", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
