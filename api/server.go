package api

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/workflow"
)

// Server is the local agent API of one node. It owns its listener, the webhook loop and the
// WebSocket connections; everything it starts ends in Close. Its configuration is read-only
// after New; the rate limiter is safe for concurrent use.
type Server struct {
	n     *node.Node
	cfg   config
	token string
	log   *slog.Logger
	mux   *http.ServeMux
	srv   *http.Server
	ln    net.Listener
	addr  string
	port  string // of addr
	ip    string // of addr: a Host the loopback check accepts besides the loopback names
	// loopback says that the server listens on a loopback address; then it answers only
	// requests addressed to a loopback name (hostAllowed).
	loopback bool
	metrics  *metrics
	limiter  *rate.Limiter // nil when the API is not rate-limited
	// book links the other drafts' answer correlation with IACP's (answers.go).
	book *answerBook
	// coord runs the coordination patterns and owns their circuit breakers (coord.go).
	coord *coord.Coordinator
	// flows runs the workflows (nil when the node keeps no store: flowsErr says so); ownFlows
	// says the server built it, and closes it.
	flows    *workflow.Engine
	flowsErr error
	ownFlows bool

	ctx       context.Context // cancelled by Close: ends streams, sockets, the webhook loop
	cancel    context.CancelFunc
	wg        sync.WaitGroup // serve loop, webhook loop, WebSocket connections
	closeOnce sync.Once
	closeErr  error
}

// New builds the API server of n, binds its listener (127.0.0.1:9700 unless WithListen says
// otherwise), starts serving and, with a data directory, writes the listen address to
// <data-dir>/api.addr. The token comes from WithToken, or from LoadOrCreateToken(data dir).
// Close stops it.
func New(n *node.Node, opts ...Option) (_ *Server, err error) {
	if n == nil {
		return nil, errors.New("api: no node")
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tok := cfg.token
	if tok == "" {
		if tok, err = LoadOrCreateToken(cfg.dataDir); err != nil {
			return nil, err
		}
	}
	log := cfg.log
	if log == nil {
		log = n.Logger()
	}
	s := &Server{n: n, cfg: cfg, token: tok, log: log.With("component", "api"), mux: http.NewServeMux(), book: newAnswerBook()}
	if cfg.ratePerSecond > 0 {
		s.limiter = rate.NewLimiter(rate.Limit(cfg.ratePerSecond), cfg.rateBurst)
	}
	if s.coord = cfg.coord; s.coord == nil {
		if s.coord, err = coord.New(n, cfg.coordOpts...); err != nil {
			return nil, err
		}
	}
	s.metrics = newMetrics(s)
	for _, rt := range s.routes() {
		s.mux.Handle(rt.Method+" "+rt.Path, s.wrap(rt))
	}
	ln, err := s.listen()
	if err != nil {
		return nil, err
	}
	// At most maxConns connections at once, the rest waiting in the kernel's accept queue; of
	// them, those without a token hold a small share (connGate).
	s.ln = newConnGate(ln, cfg.maxConns, cfg.headerTimeout)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = &http.Server{
		Handler:           s.guard(s.mux),
		ReadHeaderTimeout: cfg.headerTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext:       withConn,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if cfg.dataDir != "" {
		if err := writeAddr(cfg.dataDir, s.addr); err != nil {
			s.cancel()
			ln.Close()
			return nil, fmt.Errorf("api: write %s: %w", AddrFile, err)
		}
	}
	if err := s.startWorkflows(); err != nil {
		s.cancel()
		ln.Close()
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("api server stopped", "err", err.Error())
		}
	}()
	if cfg.webhook != "" {
		s.wg.Add(1)
		go s.webhookLoop()
	}
	s.log.Info("local API listening", "addr", s.addr, "webhook", cfg.webhook)
	if !s.loopback {
		s.log.Warn("THE LOCAL API LISTENS OFF LOOPBACK: its bearer token and every message travel in clear. "+
			"Put a TLS-terminating proxy in front of it, or keep it on 127.0.0.1", "addr", s.addr)
	}
	return s, nil
}

// listen opens the listener on cfg.listen, off loopback only when allowed, and notes the
// address it got.
func (s *Server) listen() (net.Listener, error) {
	cfg := &s.cfg
	var err error
	if s.loopback, err = loopbackHost(cfg.listen); err != nil {
		return nil, err
	}
	if !s.loopback && !cfg.allowRemote {
		return nil, errRemote(cfg.listen)
	}
	ln, err := cfg.listenFunc("tcp", cfg.listen)
	if err != nil {
		return nil, fmt.Errorf("api: listen on %s: %w (is another node running? choose another port with `iacp-node run --api 127.0.0.1:PORT`)", cfg.listen, err)
	}
	s.addr = ln.Addr().String()
	s.ip, s.port, _ = net.SplitHostPort(s.addr)
	if ip := net.ParseIP(s.ip); s.loopback && (ip == nil || !ip.IsLoopback()) && !cfg.allowRemote {
		ln.Close()
		return nil, errRemote(s.addr) // a name that resolved to loopback, bound elsewhere
	}
	return ln, nil
}

// Addr returns the address the server listens on (host:port).
func (s *Server) Addr() string { return s.addr }

// URL returns the server's base URL, http://host:port.
func (s *Server) URL() string { return "http://" + s.addr }

// Loopback reports whether the server listens on a loopback address (and so checks the Host
// of every request); false only with WithAllowRemote(true).
func (s *Server) Loopback() bool { return s.loopback }

// Coordinator returns the coordinator the server's /v1/coord routes use (WithCoordinator's,
// or its own over the node, with coord's defaults).
func (s *Server) Coordinator() *coord.Coordinator { return s.coord }

// Token returns the bearer token the server requires.
func (s *Server) Token() string { return s.token }

// Close stops the server: it removes api.addr, ends event streams, WebSockets and the webhook
// loop, lets plain requests finish for up to 5 s, and waits for every goroutine it started.
// It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.cfg.dataDir != "" {
			errs = append(errs, removeAddr(s.cfg.dataDir, s.addr))
		}
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.srv.Shutdown(ctx); err != nil {
			errs = append(errs, s.srv.Close())
		}
		cancel()
		s.wg.Wait()
		if s.ownFlows {
			errs = append(errs, s.flows.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// authorized checks the bearer token in constant time.
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.token)) == 1
}

// wrap adds authentication and metrics to a route.
func (s *Server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		authed := s.authorized(r)
		if authed {
			authenticatedConn(r)
		}
		if rt.Auth && !authed {
			s.fail(rec, r, &httpError{status: http.StatusUnauthorized, err: errorf(protocol.CodeIdentityInvalid,
				"missing or wrong bearer token: send Authorization: Bearer <token from %s in the data directory>", TokenFile)}, "")
		} else if release, err := s.holdBody(r); err != nil {
			s.fail(rec, r, err, "")
		} else {
			defer release()
			rt.handler(rec, r)
		}
		if !rt.Stream {
			s.metrics.latency.WithLabelValues(rt.Method + " " + rt.Path).Observe(time.Since(start).Seconds())
		}
	})
}

// recorder keeps the status for metrics and passes hijacking and flushing through.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// Unwrap lets http.ResponseController reach the connection (flush, hijack, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush sends buffered data (Server-Sent Events).
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to the WebSocket library.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("connection cannot be hijacked")
	}
	return h.Hijack()
}

// holdBody charges what handling r's body costs to the node's budget (Node.HoldLocal) before
// the body is read: twice its length (the body and the document built from it), its
// Content-Length, or the body limit when the client did not say. It waits at most the read
// timeout; a request the node has no room for then is refused with RATE_LIMITED.
func (s *Server) holdBody(r *http.Request) (release func(), err error) {
	size := r.ContentLength
	if size == 0 || r.Body == nil || r.Body == http.NoBody {
		return func() {}, nil
	}
	if size < 0 || size > s.cfg.maxBody {
		size = s.cfg.maxBody // an unknown length, or one readBody refuses after this many
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.readTimeout)
	defer cancel()
	release, err = s.n.HoldLocal(ctx, 2*size)
	if err != nil {
		return nil, &protocol.Error{Code: protocol.CodeRateLimited, RetryAfter: time.Second,
			Message: "the node holds as many large messages as it takes at once; retry shortly"}
	}
	return release, nil
}
