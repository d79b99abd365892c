package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Store is what the engine uses of the durable store; *store.Store implements it, with the
// semantics its methods document (docs/delivery.md, "Store API").
type Store interface {
	// The outbox.
	PreparePut(m *protocol.Message, raw []byte) (store.PreparedPut, error)
	Due(now time.Time, limit int) ([]store.OutboxEntry, error)
	Get(id string) (store.OutboxEntry, error)
	Reschedule(id string, next time.Time, lastErr string) error
	RetryNow(recipient string, now time.Time) (int, error)
	Delivered(id string) (bool, error)
	DeliveredLazily(ctx context.Context, id string) (bool, error)
	Expired(now time.Time) ([]store.OutboxEntry, error)
	Recipients() []string
	// The inbox.
	AcceptAll(ms []*protocol.Message, raws [][]byte) ([]store.AcceptResult, []error, error)
	Pending() ([]store.InboxEntry, error)
	InboxRaw(id string) ([]byte, error)
	Ack(id string) error
	AckLazily(ctx context.Context, id string) error
}

var _ Store = (*store.Store)(nil)

// Config is everything an Engine depends on. Store and Deliver are required; every other
// field has a default.
type Config struct {
	// Store holds the outbox and the inbox.
	Store Store
	// Deliver makes one delivery attempt of m, whose signed document is raw, within ctx. It
	// returns nil for a receipt, a *Refusal wrapping the refusal the recipient's node
	// answered, or the failure to reach it. resend says that m may have reached the recipient
	// before (every attempt of the retry loop): a DUPLICATE answer is then a receipt.
	Deliver func(ctx context.Context, m *protocol.Message, raw []byte, resend bool) error
	// Audit appends one entry to the audit log, and reports its own failures: the audit log
	// never stops delivery. Nil when there is no audit log.
	Audit func(audit.Entry)
	// Expired tells the sending agent that m left the outbox undelivered when its TTL passed;
	// cause is the TIMEOUT error to give it. Nil: the expiry is only audited and logged.
	Expired func(m *protocol.Message, cause *protocol.Error)
	// HandOver gives the agent a message the store accepted before a restart and the agent had
	// not taken (Redeliver); size is the document's length. Nil: Redeliver hands over nothing.
	HandOver func(m *protocol.Message, size int) error
	// PeerOf returns the peer that serves an agent, so that PeerReturned retries only the
	// recipients that peer serves. Nil: PeerReturned retries every recipient with messages
	// queued.
	PeerOf func(agentID string) (peer.ID, bool)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// RetryMin and RetryMax bound the retry delay, which doubles per failed attempt since the
	// recipient was last seen, with jitter over its upper half; 1 s and 1 min when 0.
	RetryMin, RetryMax time.Duration
	// Jitter draws the retry delays' jitter; nil: math/rand/v2's global source.
	Jitter *retry.Jitter
	// AttemptTimeout bounds each delivery attempt; 10 s when 0.
	AttemptTimeout time.Duration
	// OutboxDelay is how long Send's outbox write waits for the outcome of the first
	// attempt, which is on the wire meanwhile: a message its recipient acknowledged (or
	// refused for good) within it is never written to the outbox; any other is committed
	// then, or as soon as the attempt fails, and Send waits for that commit. 50 ms when 0;
	// negative: commit at once, while the attempt is made.
	OutboxDelay time.Duration
	// Tick is how often the retry loop looks for due and expired messages when nothing wakes
	// it sooner; 250 ms when 0.
	Tick time.Duration
	// Log gets what goes wrong; nothing is logged when nil.
	Log *slog.Logger
}

// DefaultOutboxDelay is Config.OutboxDelay's default: 50 ms, more than a round trip to a
// recipient that answers (a request's receipt comes within the recipient's receipt window,
// 20 ms by default), far less than a recipient that cannot be reached takes to fail.
const DefaultOutboxDelay = 50 * time.Millisecond

// retryConcurrency bounds the delivery attempts the retry loop runs at once.
const retryConcurrency = 32

// backCap bounds the returned peers and agents waiting for the retry loop; beyond it the
// loop retries every recipient instead.
const backCap = 256

// Engine is the durable delivery engine of one node. Its mutable state: the in-flight
// claims (guarded by their own mutex), the returned peers and agents (a channel and an
// overflow flag the retry loop drains), and the lifecycle under mu. It starts the retry loop (Start), the
// attempts the loop runs and the settling of each first attempt (Send); Close stops and waits
// for all of them.
type Engine struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	claims claims
	wake   chan struct{}
	// back holds the peers and agents that came back (PeerReturned, AgentReturned), for the
	// retry loop; backOver is set when it was full.
	back     chan comeback
	backOver atomic.Bool
	// silent holds the recipients whose last attempt failed and who were not heard from
	// since: a beat of one (AgentHeard) makes its queue due at once. At most maxSilent.
	silentMu sync.Mutex
	silent   map[string]struct{}

	mu      sync.RWMutex // orders wg.Add against Close
	started bool         // guarded by mu
	closed  bool         // guarded by mu: no new goroutines
	wg      sync.WaitGroup
}

// New returns an engine over cfg. Its work (the retry loop and the attempts it runs) stops
// when ctx ends or Close is called. It starts nothing until Start.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Deliver == nil {
		return nil, errors.New("delivery: Config.Store and Config.Deliver are required; give the engine the node's store and its send attempt")
	}
	if cfg.RetryMin < 0 || cfg.RetryMax < 0 || (cfg.RetryMax > 0 && cfg.RetryMax < cfg.RetryMin) {
		return nil, errors.New("delivery: RetryMin and RetryMax must be positive, RetryMin no more than RetryMax")
	}
	cfg.RetryMin = orDefault(cfg.RetryMin, time.Second)
	cfg.RetryMax = orDefault(cfg.RetryMax, max(time.Minute, cfg.RetryMin))
	cfg.AttemptTimeout = orDefault(cfg.AttemptTimeout, 10*time.Second)
	if cfg.OutboxDelay == 0 {
		cfg.OutboxDelay = DefaultOutboxDelay
	}
	cfg.Tick = orDefault(cfg.Tick, 250*time.Millisecond)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, claims: claims{ids: make(map[string]claim)},
		wake: make(chan struct{}, 1), back: make(chan comeback, backCap), silent: map[string]struct{}{}}
	e.ctx, e.cancel = context.WithCancel(ctx)
	return e, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Start starts the retry loop. Later calls, and calls after Close, do nothing.
func (e *Engine) Start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return
	}
	e.started = true
	e.wg.Add(1)
	go e.run()
}

// Close stops the retry loop, cancels the attempts in flight and waits for every goroutine
// the engine started. Send still works after Close, settling on the caller's goroutine. Safe
// to call more than once.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
}

// spawn runs f on a goroutine that Close waits for, unless Close has begun; then it returns
// false and f does not run.
func (e *Engine) spawn(f func()) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// poke wakes the retry loop.
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// record appends one audit entry about m; cause, when set, gives its code and reason.
func (e *Engine) record(ev audit.Event, m *protocol.Message, cause error) {
	if e.cfg.Audit == nil {
		return
	}
	en := audit.FromMessage(ev, m)
	if cause != nil {
		en.Code = protocol.CodeOf(cause)
		en.Reason = cause.Error()
	}
	e.cfg.Audit(en)
}

// claims are the ids of the messages with a delivery attempt in flight, so that Send and the
// retry loop never attempt one message twice at once, each with its claim's state. Guarded by
// mu.
type claims struct {
	mu  sync.Mutex
	ids map[string]claim
}

// claim is the state of one claimed id: whether its attempt is Send's first (the outbox may
// not hold it yet), and whether it was cancelled while in flight (Cancel).
type claim struct{ first, cancelled bool }

// take claims id, or returns false when it is claimed already; first says the claim is
// Send's.
func (c *claims) take(id string, first bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, held := c.ids[id]; held {
		return false
	}
	c.ids[id] = claim{first: first}
	return true
}

func (c *claims) release(id string) {
	c.mu.Lock()
	delete(c.ids, id)
	c.mu.Unlock()
}

// cancel marks a claimed id cancelled, and reports whether it now is a first attempt
// cancelled by this call (one that the outbox may not hold yet).
func (c *claims) cancel(id string) (firstNow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, held := c.ids[id]
	if !held {
		return false
	}
	firstNow = cl.first && !cl.cancelled
	cl.cancelled = true
	c.ids[id] = cl
	return firstNow
}

// cancelled reports whether the claimed id was cancelled.
func (c *claims) cancelled(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id].cancelled
}
