package a2abridge

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

// MaxCallBytes bounds one call's body: the node's largest message (16 MiB by default) and
// room for the A2A envelope around it.
const MaxCallBytes = 17 << 20

// AgentsPrefix is where the bridge serves the mesh's other agents: /agents/{agent_id}/ is an
// agent's base URL (its JSON-RPC endpoint, its HTTP+JSON routes under it),
// /agents/{agent_id}/.well-known/agent-card.json its card.
const AgentsPrefix = "/agents/"

// Options configure a Server. The zero value serves unsigned cards to anyone who can reach
// the listener, and waits DefaultWait for each answer.
type Options struct {
	// BaseURL is the URL A2A clients reach the bridge at, what the cards name as their
	// endpoints. Default: http:// and the Host of the request for the card.
	BaseURL string
	// Token, when not "", is the bearer token every call must present (the CLI uses the
	// node's API token: the bridge acts with its rights); the cards then declare a bearer
	// security scheme. Default "": calls need no token. Cards are public either way.
	Token string
	// Key, when not nil, signs every card (SignCard): the node's identity key, whose public
	// half the bridge serves at JWKSPath, the signatures' jku. Default nil: unsigned cards.
	Key crypto.PrivKey
	// Wait bounds how long one message waits for the mesh agent's answer, follow-up answers
	// of a pending one included. Default DefaultWait; at most MaxWait.
	Wait time.Duration
	// Version is the version the cards declare when the manifest names none. Default "dev".
	Version string
	// Logger logs what the bridge refuses or fails. Default: discard.
	Logger *slog.Logger
}

// Server is the inbound bridge: A2A clients reach the mesh's agents through a node's local
// API. Serve Handler; Close ends the calls in flight.
type Server struct {
	c    *apiclient.Client
	o    Options
	rpc  http.Handler // A2A 1.0 JSON-RPC
	rpc0 http.Handler // A2A 0.3 JSON-RPC
	rest http.Handler // A2A 1.0 HTTP+JSON
	self struct {
		sync.Mutex
		id string
	}

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
}

// NewServer returns the inbound bridge of the node that c talks to.
func NewServer(c *apiclient.Client, o Options) (*Server, error) {
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.Wait < 0 || o.Wait > MaxWait {
		return nil, fmt.Errorf("a2a bridge: wait %s: want 0 (the default, %s) up to %s", o.Wait, DefaultWait, MaxWait)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BaseURL != "" {
		u, err := url.Parse(o.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("a2a bridge: base URL %q: want an absolute http(s) URL", o.BaseURL)
		}
		o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	}
	s := &Server{c: c, o: o}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	h := a2asrv.NewHandler(&executor{s: s}, a2asrv.WithLogger(o.Logger))
	s.rpc, s.rpc0, s.rest = a2asrv.NewJSONRPCHandler(h), a2av0.NewJSONRPCHandler(h), a2asrv.NewRESTHandler(h)
	return s, nil
}

// Close ends the calls in flight (their tasks fail with TIMEOUT) and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.calls.Wait()
	return nil
}

// track counts a call in flight; done ends it. ok is false once Close has begun.
func (s *Server) track() (ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.calls.Add(1)
	return true
}

// targetKey carries the agent id a call is for, from the route to the executor (the SDK runs
// the executor in a context detached from the request's end, with its values).
type targetKey struct{}

// Handler serves the cards and the endpoints of the node's own agent and, under
// /agents/{agent_id}, of any mesh agent:
//
//	GET  /.well-known/agent-card.json   the agent's card: A2A 1.0 (supportedInterfaces) and
//	                                    0.3 (url, preferredTransport) members in one document
//	POST /                              JSON-RPC: A2A 1.0 methods (SendMessage, ...) and 0.3
//	                                    ones (message/send, ...), told apart by name (rpc.go)
//	POST /message:send, /tasks/..., ... A2A 1.0 HTTP+JSON
//	GET  /.well-known/jwks.json         the key that signs the cards (the bridge's alone)
func (s *Server) Handler() http.Handler {
	agent := http.NewServeMux()
	agent.HandleFunc("GET "+a2asrv.WellKnownAgentCardPath, s.serveCard)
	agent.HandleFunc("POST /{$}", s.authorized(s.serveRPC))
	agent.Handle("/", s.authorized(s.rest.ServeHTTP))
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+JWKSPath, s.serveJWKS)
	mux.HandleFunc(AgentsPrefix+"{agent}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("agent")
		if err := protocol.ValidateAgentID(id); err != nil {
			http.Error(w, "AGENT_NOT_FOUND: "+err.Error(), http.StatusNotFound)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), targetKey{}, id))
		r.URL.Path, r.URL.RawPath = "/"+r.PathValue("rest"), ""
		agent.ServeHTTP(w, r)
	})
	mux.HandleFunc("POST "+AgentsPrefix+"{agent}", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path, r.URL.RawPath = r.URL.Path+"/", ""
		mux.ServeHTTP(w, r)
	})
	mux.Handle("/", agent)
	return http.MaxBytesHandler(mux, MaxCallBytes) // the SDK decodes bodies unbounded
}

// authorized has h serve only calls that present the bridge's token, when it has one, and
// names the node's own agent as the target of a call that names none.
func (s *Server) authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+s.o.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="iacp-node a2a"`)
			http.Error(w, "send the node's API token (<data-dir>/api.token) as Authorization: Bearer", http.StatusUnauthorized)
			return
		}
		if target, _ := r.Context().Value(targetKey{}).(string); target == "" {
			id, err := s.selfID(r.Context())
			if err != nil {
				http.Error(w, "the node's API: "+err.Error(), http.StatusBadGateway)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), targetKey{}, id))
		}
		h(w, r)
	}
}

// selfID is the node's own agent id, asked of the API once.
func (s *Server) selfID(ctx context.Context) (string, error) {
	s.self.Lock()
	defer s.self.Unlock()
	if s.self.id == "" {
		st, err := s.c.Status(ctx)
		if err != nil {
			return "", err
		}
		s.self.id = st.AgentID
	}
	return s.self.id, nil
}

// serveCard answers an agent's card: the node's own from its status, another's from its
// record in the mesh (404 when the mesh does not know it), with the members of both A2A 1.0
// and 0.3 (UnionCardJSON), signed over its 1.0 form.
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	agent, _ := r.Context().Value(targetKey{}).(string)
	card, err := s.Card(r.Context(), agent, s.base(r))
	if err != nil {
		code := api.StatusOf(protocol.CodeOf(err))
		if code == http.StatusInternalServerError {
			code = http.StatusBadGateway
		}
		http.Error(w, err.Error(), code)
		return
	}
	raw, err := UnionCardJSON(card)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(raw)
}

// serveJWKS answers the key set of the key that signs the cards; 404 with unsigned cards.
func (s *Server) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	if s.o.Key == nil {
		http.Error(w, "this bridge serves unsigned cards (a2a serve --unsigned): it has no key set", http.StatusNotFound)
		return
	}
	set, err := JWKSOf(s.o.Key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_ = json.NewEncoder(w).Encode(set)
}

// base is the bridge's base URL as a client reached it.
func (s *Server) base(r *http.Request) string {
	if s.o.BaseURL != "" {
		return s.o.BaseURL
	}
	return "http://" + r.Host
}

// Card returns the card of agent ("" the node's own), whose endpoints are under base.
func (s *Server) Card(ctx context.Context, agent, base string) (*a2a.AgentCard, error) {
	var m protocol.Manifest
	var pid string
	endpoint := base + "/"
	if agent == "" {
		st, err := s.c.Status(ctx)
		if err != nil {
			return nil, err
		}
		agent, m, pid = st.AgentID, manifestOf(st.Manifest), st.PeerID
	} else {
		rec, err := s.c.Resolve(ctx, agent)
		if err != nil {
			return nil, err
		}
		m, pid, endpoint = manifestOf(rec.Manifest), rec.PeerID, base+AgentsPrefix+url.PathEscape(agent)+"/"
	}
	card := CardOf(agent, m, endpoint, s.o.Version, pid)
	if s.o.Token != "" {
		card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "the node's API token (<data-dir>/api.token)"}}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{"bearer": a2a.SecuritySchemeScopes{}}}
	}
	if s.o.Key != nil {
		card.Capabilities.Extensions[0].Params["signed_by"] = peerOf(s.o.Key)
		if err := SignCard(card, s.o.Key, base+JWKSPath); err != nil {
			return nil, err
		}
	}
	return card, nil
}

// peerOf is the peer id of key, "" when it has none.
func peerOf(key crypto.PrivKey) string {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return ""
	}
	return id.String()
}

// errClosed is what a call that arrives once Close has begun fails with.
var errClosed = errors.New("the A2A bridge is closing")
