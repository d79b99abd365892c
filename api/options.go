package api

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/workflow"
)

// DefaultPort is the API's TCP port: IaCP 1.0 section 5.1 reserves 9000-9999 for the local
// agent API, and 9700 is ours.
const DefaultPort = 9700

// Defaults and bounds, in one place. Each number is the default of one Option, unless its
// comment says it is fixed or the default of a query parameter.
const (
	// DefaultListen is loopback only: the API carries the agent's authority.
	DefaultListen = "127.0.0.1:9700"
	// DefaultMaxBodyBytes bounds a request body: 16 MiB, the direct-message limit
	// (IaCP 1.0 section 10).
	DefaultMaxBodyBytes = 16 << 20
	// DefaultMaxWait bounds ?wait= on requests and long polls: 5 minutes.
	DefaultMaxWait = 5 * time.Minute
	// DefaultSendTimeout bounds a POST without ?wait: the recipient's receipt usually comes
	// in milliseconds; 30 s covers a dial through a relay.
	DefaultSendTimeout = 30 * time.Second
	// DefaultPingInterval is how often the WebSocket server pings; a client that does not
	// answer within DefaultPingTimeout is dropped.
	DefaultPingInterval = 15 * time.Second
	// DefaultPingTimeout bounds the wait for a pong.
	DefaultPingTimeout = 10 * time.Second
	// DefaultReadIdle bounds one WebSocket read: a client silent for this long (no frame, no
	// pong) is dropped. It must exceed the ping interval.
	DefaultReadIdle = 60 * time.Second
	// DefaultWebhookMinBackoff and DefaultWebhookMaxBackoff bound the wait between two posts
	// of one message: it doubles from the minimum to the maximum with jitter, and the webhook
	// never gives up on a message the agent has not taken before it expires.
	DefaultWebhookMinBackoff = 100 * time.Millisecond
	DefaultWebhookMaxBackoff = 30 * time.Second
	// DefaultWebhookConcurrency bounds the webhook posts in flight: 4, so that a message the
	// agent keeps failing holds one post at a time and never the others.
	DefaultWebhookConcurrency = 4
	// DefaultWebhookTimeout bounds one webhook POST.
	DefaultWebhookTimeout = 10 * time.Second
	// DefaultSSEKeepAlive is the interval of SSE comment lines that keep proxies from closing
	// an idle stream.
	DefaultSSEKeepAlive = 15 * time.Second
	// DefaultHeaderTimeout bounds reading a request's headers: 10 s, ample on loopback, and a
	// client that trickles them (slowloris) loses its connection.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a request's body, from the end of its headers to its
	// last byte: 30 s carries 16 MiB at 4.5 Mbit/s. A client that announces a body and
	// withholds it loses its connection.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing one answer once the handler has it: 30 s, the same
	// 16 MiB at 4.5 Mbit/s, so that a client that stops reading frees its connection.
	// Streams (WebSocket, events) bound each of their writes by the ping timeout instead.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection that carries no request for 2 minutes
	// (fixed).
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's headers: 64 KiB (fixed; a bearer token and a
	// few headers need well under 1 KiB).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConnections bounds the connections served at once: 256, well under the
	// usual 1024 file descriptors of a process, so that clients holding connections open
	// cannot exhaust them. Further connections wait in the kernel's accept queue.
	DefaultMaxConnections = 256
	// DefaultInboxPageBytes is the default of ?max_bytes=, the byte budget of one
	// GET /v1/inbox page: 8 MiB of messages (as JSON). A page always holds at least one
	// message, even a larger one, so that every message can be taken.
	DefaultInboxPageBytes = 8 << 20
	// MaxInboxPageBytes bounds ?max_bytes= (fixed): 64 MiB.
	MaxInboxPageBytes = 64 << 20
)

// Option configures a Server.
type Option func(*config) error

type config struct {
	listen         string
	allowRemote    bool
	dataDir        string
	token          string
	maxBody        int64
	maxWait        time.Duration
	sendTimeout    time.Duration
	headerTimeout  time.Duration
	readTimeout    time.Duration
	writeTimeout   time.Duration
	maxConns       int
	pingInterval   time.Duration
	pingTimeout    time.Duration
	readIdle       time.Duration
	webhook        string
	webhookToken   string
	webhookMin     time.Duration
	webhookMax     time.Duration
	webhookConc    int
	webhookTimeout time.Duration
	ratePerSecond  float64
	rateBurst      int
	sseKeepAlive   time.Duration
	coord          *coord.Coordinator
	flows          *workflow.Engine
	coordOpts      []coord.Option
	log            *slog.Logger
	now            func() time.Time
	// listenFunc listens (net.Listen; tests put a listener of their own on 127.0.0.1).
	listenFunc func(network, addr string) (net.Listener, error)
}

func defaults() config {
	return config{
		listen:         DefaultListen,
		maxBody:        DefaultMaxBodyBytes,
		maxWait:        DefaultMaxWait,
		sendTimeout:    DefaultSendTimeout,
		headerTimeout:  DefaultHeaderTimeout,
		readTimeout:    DefaultReadTimeout,
		writeTimeout:   DefaultWriteTimeout,
		maxConns:       DefaultMaxConnections,
		pingInterval:   DefaultPingInterval,
		pingTimeout:    DefaultPingTimeout,
		readIdle:       DefaultReadIdle,
		webhookMin:     DefaultWebhookMinBackoff,
		webhookMax:     DefaultWebhookMaxBackoff,
		webhookConc:    DefaultWebhookConcurrency,
		webhookTimeout: DefaultWebhookTimeout,
		sseKeepAlive:   DefaultSSEKeepAlive,
		now:            time.Now,
		listenFunc:     net.Listen,
	}
}

func (c *config) validate() error {
	if _, _, err := net.SplitHostPort(c.listen); err != nil {
		return fmt.Errorf("api listen address %q: %w (use host:port, e.g. %s)", c.listen, err, DefaultListen)
	}
	if c.token == "" && c.dataDir == "" {
		return fmt.Errorf("api: no token: set WithDataDir (token read from %s there) or WithToken", TokenFile)
	}
	if c.maxBody < 1024 || c.maxBody > 1<<30 {
		return fmt.Errorf("api max body %d bytes: must be 1 KiB to 1 GiB", c.maxBody)
	}
	if c.maxWait <= 0 || c.sendTimeout <= 0 {
		return fmt.Errorf("api max wait and send timeout must be positive")
	}
	if c.headerTimeout <= 0 || c.readTimeout <= 0 || c.writeTimeout <= 0 {
		return fmt.Errorf("api header timeout (%s), read timeout (%s) and write timeout (%s) must be positive", c.headerTimeout, c.readTimeout, c.writeTimeout)
	}
	if c.maxConns < 1 || c.maxConns > 1<<16 {
		return fmt.Errorf("api max connections %d: must be 1 to 65536", c.maxConns)
	}
	if c.pingInterval <= 0 || c.pingTimeout <= 0 || c.readIdle <= c.pingInterval {
		return fmt.Errorf("api ping interval and timeout must be positive and the read idle timeout (%s) longer than the ping interval (%s)", c.readIdle, c.pingInterval)
	}
	if c.webhook != "" {
		u, err := url.Parse(c.webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("api webhook %q must be an absolute http(s) URL, e.g. http://127.0.0.1:8080/.well-known/iacp/v1/message", c.webhook)
		}
	}
	if c.webhookMin <= 0 || c.webhookMax < c.webhookMin || c.webhookTimeout <= 0 {
		return fmt.Errorf("api webhook backoff must be 0 < min (%s) <= max (%s) and its timeout (%s) positive", c.webhookMin, c.webhookMax, c.webhookTimeout)
	}
	if c.webhookConc < 1 || c.webhookConc > 64 {
		return fmt.Errorf("api webhook concurrency %d: must be 1 to 64", c.webhookConc)
	}
	if c.ratePerSecond < 0 || (c.ratePerSecond > 0 && c.rateBurst < 1) {
		return fmt.Errorf("api rate limit: per second must be >= 0 (0 is off) and burst >= 1")
	}
	if c.sseKeepAlive <= 0 {
		return fmt.Errorf("api SSE keep-alive must be positive")
	}
	return nil
}

// WithListen sets the host:port to listen on (default DefaultListen; port 0 picks a free one).
// An address that is not loopback is refused unless WithAllowRemote(true) is given too.
func WithListen(addr string) Option { return func(c *config) error { c.listen = addr; return nil } }

// WithAllowRemote allows a listen address that is not loopback (default false). The API
// speaks plain HTTP, so its bearer token and every message then travel in clear: put a
// TLS-terminating proxy in front of it. On such an address the server does not check the
// Host header (the proxy's name is not known to it); on loopback it answers only requests
// addressed to localhost, 127.0.0.1 or [::1], which defeats DNS rebinding.
func WithAllowRemote(allow bool) Option {
	return func(c *config) error { c.allowRemote = allow; return nil }
}

// WithDataDir sets the data directory: the token is read from (or created in) api.token there
// unless WithToken is given, and api.addr is written there while the server runs.
func WithDataDir(dir string) Option { return func(c *config) error { c.dataDir = dir; return nil } }

// WithToken sets the bearer token instead of reading it from the data directory.
func WithToken(tok string) Option {
	return func(c *config) error {
		if len(tok) < 16 {
			return fmt.Errorf("api token must be at least 16 characters")
		}
		c.token = tok
		return nil
	}
}

// WithMaxBodyBytes bounds request bodies and WebSocket frames (default DefaultMaxBodyBytes);
// larger ones are refused with 413.
func WithMaxBodyBytes(n int64) Option { return func(c *config) error { c.maxBody = n; return nil } }

// WithMaxWait bounds ?wait= durations (default DefaultMaxWait).
func WithMaxWait(d time.Duration) Option { return func(c *config) error { c.maxWait = d; return nil } }

// WithSendTimeout bounds a message POST that does not wait for a response (default
// DefaultSendTimeout).
func WithSendTimeout(d time.Duration) Option {
	return func(c *config) error { c.sendTimeout = d; return nil }
}

// WithHeaderTimeout bounds reading a request's headers (default DefaultHeaderTimeout).
func WithHeaderTimeout(d time.Duration) Option {
	return func(c *config) error { c.headerTimeout = d; return nil }
}

// WithReadTimeout bounds reading a request's body, from the end of its headers to its last
// byte (default DefaultReadTimeout). A body that does not arrive in time is answered 408 and
// the connection closed. Requests without a body (long polls, the event stream, the WebSocket
// upgrade) have nothing to read and are not bounded by it.
func WithReadTimeout(d time.Duration) Option {
	return func(c *config) error { c.readTimeout = d; return nil }
}

// WithWriteTimeout bounds writing one answer (default DefaultWriteTimeout); a client that does
// not read it in time loses its connection. Streams bound each write by the ping timeout.
func WithWriteTimeout(d time.Duration) Option {
	return func(c *config) error { c.writeTimeout = d; return nil }
}

// WithMaxConnections bounds the connections served at once, WebSockets and event streams
// included (default DefaultMaxConnections); further ones wait to be accepted.
func WithMaxConnections(n int) Option { return func(c *config) error { c.maxConns = n; return nil } }

// WithPing sets the WebSocket heartbeat: a ping every interval, answered within timeout
// (defaults DefaultPingInterval, DefaultPingTimeout).
func WithPing(interval, timeout time.Duration) Option {
	return func(c *config) error {
		c.pingInterval, c.pingTimeout = interval, timeout
		if c.readIdle <= interval {
			c.readIdle = 4 * interval
		}
		return nil
	}
}

// WithWebhook makes the server POST every inbound message to url (the agent's own
// /.well-known/iacp/v1/message) and acknowledge it once the agent answers 2xx. token, when
// not empty, is sent as a bearer token.
func WithWebhook(url, token string) Option {
	return func(c *config) error { c.webhook, c.webhookToken = url, token; return nil }
}

// WithWebhookBackoff sets the wait between two posts of one message: from min, doubling up to
// max, with jitter (defaults DefaultWebhookMinBackoff, DefaultWebhookMaxBackoff). There is no
// attempt limit: a message is posted until the agent takes it or it expires.
func WithWebhookBackoff(min, max time.Duration) Option {
	return func(c *config) error { c.webhookMin, c.webhookMax = min, max; return nil }
}

// WithWebhookConcurrency bounds the webhook posts in flight (default
// DefaultWebhookConcurrency, at most 64).
func WithWebhookConcurrency(n int) Option {
	return func(c *config) error { c.webhookConc = n; return nil }
}

// WithRateLimit limits message POSTs and WebSocket sends to perSecond with bursts of burst;
// beyond it the API answers 429 RATE_LIMITED with Retry-After. Default off (0): the node's
// peers rate-limit us in any case.
func WithRateLimit(perSecond float64, burst int) Option {
	return func(c *config) error { c.ratePerSecond, c.rateBurst = perSecond, burst; return nil }
}

// WithLogger sets the logger (default: the node's logger).
func WithLogger(l *slog.Logger) Option { return func(c *config) error { c.log = l; return nil } }

// WithSSEKeepAlive sets the interval of keep-alive comments on the event stream.
func WithSSEKeepAlive(d time.Duration) Option {
	return func(c *config) error { c.sseKeepAlive = d; return nil }
}

// WithWorkflows makes the /v1/workflows routes use e (built over the same node), so that a
// Go agent and its local API share one engine; the server then does not close it. Default:
// the server builds the node's engine (workflow.New) and closes it with itself.
func WithWorkflows(e *workflow.Engine) Option {
	return func(c *config) error { c.flows = e; return nil }
}

// WithCoordinator makes the /v1/coord routes use c (built over the same node), so that a Go
// agent and the API share one set of circuit breakers. Default: the server builds its own
// with coord's defaults.
func WithCoordinator(c *coord.Coordinator) Option {
	return func(cfg *config) error {
		cfg.coord = c
		return nil
	}
}

// WithCoordOptions sets the options of the coordinator the server builds for its /v1/coord
// routes (coord's defaults otherwise; docs/coordination.md). WithCoordinator overrides it.
func WithCoordOptions(opts ...coord.Option) Option {
	return func(cfg *config) error {
		cfg.coordOpts = append(cfg.coordOpts, opts...)
		return nil
	}
}
