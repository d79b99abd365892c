package delivery_test

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// The fakes: a clock the test moves, an in-memory store with the semantics *store.Store
// documents, a wire whose every attempt the test answers, and an audit log in memory. Each
// fake broadcasts its changes (changes), so that a test waits for a state, never for a time.

// changes is a broadcast of "something changed": wait returns at the next change.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
	}
	c.ch = make(chan struct{})
}

// hangGuard only stops a test that would otherwise hang: no assertion depends on it.
const hangGuard = 30 * time.Second

// eventually waits until cond holds, re-checking it at each change of c.
func eventually(t *testing.T, c *changes, what string, cond func() bool) {
	t.Helper()
	guard := time.After(hangGuard)
	for {
		ch := c.wait()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-guard:
			t.Fatalf("never: %s", what)
		}
	}
}

// clock is the engine's and the store's clock, moved by the test only.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeStore is an in-memory delivery.Store.
type fakeStore struct {
	changes
	now func() time.Time

	mu       sync.Mutex
	seq      uint64
	out      map[string]*store.OutboxEntry
	inbox    []store.InboxEntry
	seen     map[string]bool
	dueCalls int
	dueRead  func([]store.OutboxEntry) // when set, Due calls it with what it read, unlocked
	hold     *held                     // when set, commits wait for it (holdCommits)
	holding  atomic.Int32              // commits that waited on a hold

	abandoned atomic.Int32 // prepared puts abandoned
}

var _ delivery.Store = (*fakeStore)(nil)

func newFakeStore(now func() time.Time) *fakeStore {
	return &fakeStore{now: now, out: map[string]*store.OutboxEntry{}, seen: map[string]bool{}}
}

// PreparePut returns a prepared put whose Commit stores m, after waiting for the test to let
// it go when the test holds commits (holdCommits), and whose Abandon counts itself.
func (s *fakeStore) PreparePut(m *protocol.Message, raw []byte) (store.PreparedPut, error) {
	s.mu.Lock()
	h := s.hold
	s.mu.Unlock()
	return &fakePut{s: s, m: m, raw: raw, hold: h}, nil
}

// fakePut is fakeStore's store.PreparedPut.
type fakePut struct {
	s    *fakeStore
	m    *protocol.Message
	raw  []byte
	hold *held
}

func (p *fakePut) Commit() error {
	if h := p.hold; h != nil {
		p.s.holding.Add(1)
		p.s.changed()
		<-h.release
		if h.err != nil {
			return h.err
		}
	}
	return p.s.put(p.m, p.raw)
}

func (p *fakePut) Abandon() {
	p.s.abandoned.Add(1)
	p.s.changed()
}

// held is a hold on the commits PreparePut returns: they wait for release, then fail with err
// when it is set.
type held struct {
	release chan struct{}
	err     error
}

// holdCommits makes every commit PreparePut returns from now on wait until the returned
// func is first called, which lets them go, failing with err when err is not nil; holding
// counts the commits that waited.
func (s *fakeStore) holdCommits() (release func(err error)) {
	h := &held{release: make(chan struct{})}
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			s.mu.Lock()
			if s.hold == h {
				s.hold = nil
			}
			s.mu.Unlock()
			h.err = err
			close(h.release)
		})
	}
}

func (s *fakeStore) put(m *protocol.Message, raw []byte) error {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.out[m.Envelope.MessageID]; ok {
		return nil
	}
	s.seq++
	now := s.now()
	s.out[m.Envelope.MessageID] = &store.OutboxEntry{MessageID: m.Envelope.MessageID, Recipient: m.Envelope.Recipient.AgentID,
		Raw: raw, Seq: s.seq, EnqueuedAt: now, ExpiresAt: m.Expires(), NextAttemptAt: now}
	return nil
}

func (s *fakeStore) Due(now time.Time, limit int) ([]store.OutboxEntry, error) {
	out := s.due(now, limit)
	s.mu.Lock()
	read := s.dueRead
	s.mu.Unlock()
	if read != nil {
		read(out)
	}
	return out, nil
}

// onDueRead makes Due call f with what it read, before it returns.
func (s *fakeStore) onDueRead(f func([]store.OutboxEntry)) {
	s.mu.Lock()
	s.dueRead = f
	s.mu.Unlock()
}

func (s *fakeStore) Get(id string) (store.OutboxEntry, error) {
	if e, ok := s.queued(id); ok {
		return e, nil
	}
	return store.OutboxEntry{}, store.ErrNotFound
}

func (s *fakeStore) due(now time.Time, limit int) []store.OutboxEntry {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dueCalls++
	var out []store.OutboxEntry
	for _, e := range s.out {
		if !e.NextAttemptAt.After(now) && e.ExpiresAt.After(now) {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b store.OutboxEntry) int {
		return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), cmp.Compare(a.Seq, b.Seq))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (s *fakeStore) Reschedule(id string, next time.Time, lastErr string) error {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.out[id]
	if !ok {
		return store.ErrNotFound
	}
	e.Attempts++
	e.Backoff++
	e.NextAttemptAt, e.LastError = next, lastErr
	return nil
}

func (s *fakeStore) RetryNow(recipient string, now time.Time) (int, error) {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	moved := 0
	for _, e := range s.out {
		if e.Recipient == recipient && e.NextAttemptAt.After(now) {
			e.NextAttemptAt, e.Backoff = now, 0
			moved++
		}
	}
	return moved, nil
}

func (s *fakeStore) Delivered(id string) (bool, error) {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.out[id]
	delete(s.out, id)
	return ok, nil
}

// DeliveredLazily is Delivered: the fake has no commits to ride in.
func (s *fakeStore) DeliveredLazily(_ context.Context, id string) (bool, error) {
	return s.Delivered(id)
}

func (s *fakeStore) Expired(now time.Time) ([]store.OutboxEntry, error) {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.OutboxEntry
	for id, e := range s.out {
		if !e.ExpiresAt.After(now) {
			out = append(out, *e)
			delete(s.out, id)
		}
	}
	slices.SortFunc(out, func(a, b store.OutboxEntry) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return out, nil
}

func (s *fakeStore) Recipients() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.out {
		if !slices.Contains(out, e.Recipient) {
			out = append(out, e.Recipient)
		}
	}
	return out
}

func (s *fakeStore) AcceptAll(ms []*protocol.Message, raws [][]byte) ([]store.AcceptResult, []error, error) {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	res, errs := make([]store.AcceptResult, len(ms)), make([]error, len(ms))
	for i, m := range ms {
		id := m.Envelope.MessageID
		if s.seen[id] {
			res[i].Duplicate = true
			continue
		}
		s.seen[id] = true
		s.seq++
		s.inbox = append(s.inbox, store.InboxEntry{MessageID: id, From: m.Envelope.Sender.AgentID,
			To: m.Envelope.Recipient.AgentID, Raw: raws[i], Seq: s.seq, ReceivedAt: s.now(), ExpiresAt: m.Expires()})
		res[i] = store.AcceptResult{Pending: true, Seq: s.seq}
	}
	return res, errs, nil
}

func (s *fakeStore) Pending() ([]store.InboxEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.inbox), nil
}

func (s *fakeStore) InboxRaw(id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.inbox {
		if e.MessageID == id {
			return e.Raw, nil
		}
	}
	return nil, store.ErrNotFound
}

func (s *fakeStore) Ack(id string) error {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.inbox, func(e store.InboxEntry) bool { return e.MessageID == id })
	if i < 0 {
		return store.ErrNotFound
	}
	s.inbox = slices.Delete(s.inbox, i, i+1)
	return nil
}

// AckLazily is Ack: the fake has no commits to ride in.
func (s *fakeStore) AckLazily(_ context.Context, id string) error { return s.Ack(id) }

// queued returns a copy of the outbox entry of id, and whether there is one.
func (s *fakeStore) queued(id string) (store.OutboxEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.out[id]
	if !ok {
		return store.OutboxEntry{}, false
	}
	return *e, true
}

func (s *fakeStore) outboxLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.out)
}

func (s *fakeStore) dues() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dueCalls
}

// attempt is one call of Deliver, waiting for the test's answer.
type attempt struct {
	m      *protocol.Message
	resend bool
	answer chan error
}

// wire is a Deliver that hands every attempt to the test and returns what the test answers
// (or the attempt's context error, when it ends first).
type wire struct {
	attempts chan attempt
}

func newWire() *wire { return &wire{attempts: make(chan attempt)} }

func (w *wire) Deliver(ctx context.Context, m *protocol.Message, _ []byte, resend bool) error {
	a := attempt{m: m, resend: resend, answer: make(chan error, 1)}
	select {
	case w.attempts <- a:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-a.answer:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next returns the next attempt.
func (w *wire) next(t *testing.T) attempt {
	t.Helper()
	select {
	case a := <-w.attempts:
		return a
	case <-time.After(hangGuard):
		t.Fatal("no delivery attempt")
		return attempt{}
	}
}

// auditLog is an audit log in memory.
type auditLog struct {
	changes
	mu      sync.Mutex
	entries []audit.Entry
}

func (l *auditLog) Append(e audit.Entry) {
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
	l.changed()
}

// of returns the entries about message id, in order.
func (l *auditLog) of(id string) []audit.Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []audit.Entry
	for _, e := range l.entries {
		if e.MessageID == id {
			out = append(out, e)
		}
	}
	return out
}

func (l *auditLog) events(id string) []audit.Event {
	var out []audit.Event
	for _, e := range l.of(id) {
		out = append(out, e.Event)
	}
	return out
}

// newBuilder returns a builder signing as agent with the test's clock.
func newBuilder(t *testing.T, agent string, now func() time.Time) *protocol.Builder {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.NewBuilder(agent, key, now)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
