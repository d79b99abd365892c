package quietlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// One line per key per interval, each saying how many were held back since the last.
func TestAllow_OneLinePerKeyPerInterval(t *testing.T) {
	l := New(10*time.Second, 100, 16)
	t0 := time.Unix(1_000_000, 0)
	if ok, held := l.Allow("mallory", t0); !ok || held != 0 {
		t.Fatalf("the first line: %v, %d held", ok, held)
	}
	for i := range 50 {
		if ok, _ := l.Allow("mallory", t0.Add(time.Duration(i)*100*time.Millisecond)); ok {
			t.Fatalf("line %d within the interval was let through", i+2)
		}
	}
	if ok, _ := l.Allow("bob", t0.Add(time.Second)); !ok {
		t.Fatal("another key was held back by mallory's")
	}
	if ok, held := l.Allow("mallory", t0.Add(10*time.Second)); !ok || held != 50 {
		t.Fatalf("after the interval: %v, %d held; want a line saying 50 were held", ok, held)
	}
}

// Many keys together get no more than the bound across keys.
func TestAllow_ManyKeysShareOneBound(t *testing.T) {
	l := New(time.Minute, 5, 1000)
	t0 := time.Unix(1_000_000, 0)
	written := 0
	for i := range 500 {
		if ok, _ := l.Allow(fmt.Sprint("sybil", i), t0); ok {
			written++
		}
	}
	if written != 5 {
		t.Fatalf("%d lines for 500 new keys at one instant; want the burst of 5", written)
	}
	if l.keys.Len() != 500 {
		t.Fatalf("%d keys remembered", l.keys.Len())
	}
}

// The Logger writes the lines the limiter lets through, saying how many it held back.
func TestLogger_SaysHowManyWereHeldBack(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_000_000, 0)
	q := NewLogger(slog.New(slog.NewTextHandler(&buf, nil)), New(10*time.Second, 100, 16), func() time.Time { return now })
	for range 127 {
		q.Info("mallory", "message refused", "code", "IDENTITY_INVALID")
	}
	now = now.Add(11 * time.Second)
	q.Warn("mallory", "message refused", "code", "IDENTITY_INVALID")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "held_back") || !strings.Contains(lines[1], "held_back=126") || !strings.Contains(lines[1], "WARN") {
		t.Fatalf("log:\n%s\nwant two lines, the second saying 126 were held back", buf.String())
	}
}
