package store

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

// t0 is the fixed start of every injected clock.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock for WithClock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// msg returns a message from agent "a:h:sender" to `to`, created at ts, living ttl seconds,
// with a payload of about size bytes, and its raw JSON.
func msg(t testing.TB, to string, ts time.Time, ttl int64, size int) (*protocol.Message, []byte) {
	t.Helper()
	m, raw, err := newMsg(to, ts, ttl, size)
	if err != nil {
		t.Fatal(err)
	}
	return m, raw
}

// msgFrom is msg sent by peer (envelope.sender.peer_id), as the node has authenticated it.
func msgFrom(t testing.TB, peer, to string, ts time.Time, ttl int64, size int) (*protocol.Message, []byte) {
	t.Helper()
	m, raw, err := newMsgFrom(peer, to, ts, ttl, size)
	if err != nil {
		t.Fatal(err)
	}
	return m, raw
}

func newMsg(to string, ts time.Time, ttl int64, size int) (*protocol.Message, []byte, error) {
	return newMsgFrom("", to, ts, ttl, size)
}

func newMsgFrom(peer, to string, ts time.Time, ttl int64, size int) (*protocol.Message, []byte, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, nil, err
	}
	m := &protocol.Message{
		Envelope: protocol.Envelope{
			Version: "1.0", MessageID: id.String(),
			Sender:    protocol.Sender{AgentID: "a:h:sender", PeerID: peer},
			Recipient: protocol.Recipient{AgentID: to, Channel: "default"},
			Timestamp: ts.UTC().Format(time.RFC3339Nano), TTLSeconds: ttl,
		},
		Message: protocol.Body{Type: "event", Intent: "notify",
			Payload: []byte(`{"data":"` + string(bytes.Repeat([]byte("x"), size)) + `"}`)},
	}
	raw, err := protocol.EncodeJSON(m)
	return m, raw, err
}

func open(t testing.TB, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, append([]Option{WithBatchDelay(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ids(entries []OutboxEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.MessageID
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
