package coord

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// A breaker opens after its threshold, fails fast while open (the agent is not
// asked), lets one probe through after OpenFor, reopens when the probe fails, and closes
// after a successful probe. The clock is the test's.
func TestBreaker_OpensFailsFastAndClosesAfterAProbe(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	r := newRig(t, 2, rigOpts{handle: func(i int, req *node.Request) error {
		if failing.Load() {
			return req.Fail(protocol.Errorf(protocol.CodeInternalError, "broken"))
		}
		return req.Reply(protocol.ResponseAccepted, nil)
	}})
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := r.coordinator(t, WithClock(clk.Now), WithBreaker(3, 10*time.Second, 1))
	ctx := testCtx(t, 20*time.Second)
	target := agentName(1)
	for i := range 3 {
		if a := c.Call(ctx, target, query, CallOptions{}); a.Code() != protocol.CodeInternalError {
			t.Fatalf("call %d: %v, want the agent's INTERNAL_ERROR", i, a.Err)
		}
	}
	if b, _ := c.Breaker(target); b.State != Open || b.Failures != 3 {
		t.Fatalf("after 3 failures: %+v, want open", b)
	}
	a := c.Call(ctx, target, query, CallOptions{Retry: RetryPolicy{Attempts: 5}})
	var pe *protocol.Error
	if !errors.Is(a.Err, ErrCircuitOpen) || !errors.As(a.Err, &pe) || pe.Code != protocol.CodeAgentNotFound || pe.RetryAfter != 10*time.Second || a.Attempts != 0 {
		t.Fatalf("call to an open circuit: %v (attempts %d), want AGENT_NOT_FOUND / circuit open, retry after 10s, no attempt", a.Err, a.Attempts)
	}
	if n := r.hits[1].Load(); n != 3 {
		t.Fatalf("the agent was asked %d times, want 3: an open circuit asks nobody", n)
	}

	clk.Add(10 * time.Second) // a probe may pass; it fails: open again
	if a := c.Call(ctx, target, query, CallOptions{}); a.Code() != protocol.CodeInternalError {
		t.Fatalf("failing probe: %v", a.Err)
	}
	if b, _ := c.Breaker(target); b.State != Open {
		t.Fatalf("after a failed probe: %s, want open", b.State)
	}
	failing.Store(false)
	if a := c.Call(ctx, target, query, CallOptions{}); !errors.Is(a.Err, ErrCircuitOpen) {
		t.Fatalf("right after the failed probe: %v, want the open circuit", a.Err)
	}
	clk.Add(10 * time.Second)
	if a := c.Call(ctx, target, query, CallOptions{}); a.Err != nil {
		t.Fatalf("succeeding probe: %v", a.Err)
	}
	if b, _ := c.Breaker(target); b.State != Closed || b.Failures != 0 {
		t.Fatalf("after a good probe: %+v, want closed", b)
	}
	trs, seq, _ := c.Transitions(0)
	var path []BreakerState
	for _, tr := range trs {
		path = append(path, tr.To)
	}
	want := []BreakerState{Open, HalfOpen, Open, HalfOpen, Closed}
	if !slices.Equal(path, want) || seq != 5 || trs[0].Cause != protocol.CodeInternalError {
		t.Fatalf("transitions %+v, want %v", trs, want)
	}
	st := c.BreakerStats()
	if st.Opened != 2 || st.Refused != 2 || st.ByState[Closed] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A final refusal (the agent answered) does not count against its circuit.
func TestBreaker_FinalRefusalIsNotAFailure(t *testing.T) {
	r := newRig(t, 2, rigOpts{handle: func(i int, req *node.Request) error {
		return req.Fail(protocol.Errorf(protocol.CodePermissionDenied, "no"))
	}})
	c := r.coordinator(t, WithBreaker(1, time.Minute, 1))
	ctx := testCtx(t, 20*time.Second)
	for range 3 {
		if a := c.Call(ctx, agentName(1), query, CallOptions{}); a.Code() != protocol.CodePermissionDenied {
			t.Fatalf("%v, want PERMISSION_DENIED", a.Err)
		}
	}
	if b, _ := c.Breaker(agentName(1)); b.State != Closed {
		t.Fatalf("%s, want closed", b.State)
	}
}

// The breakers are bounded: an idle one goes first, else the least recently used.
func TestBreakers_BoundedEvictIdleThenLRU(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := DefaultConfig()
	cfg.MaxBreakers, cfg.BreakerIdle = 2, time.Minute
	b := newBreakers(&cfg, clk.Now)
	use := func(id string) { p, _ := b.admit(id); b.record(id, p, success, "") }
	use("a:b:one")
	clk.Add(time.Second)
	use("a:b:two")
	clk.Add(time.Second)
	use("a:b:three") // full: one, the least recently used, goes
	if ids := ids(b.list()); !slices.Equal(ids, []string{"a:b:three", "a:b:two"}) {
		t.Fatalf("kept %v", ids)
	}
	clk.Add(2 * time.Minute)
	use("a:b:two")
	use("a:b:four") // three is idle: it goes although two is not older
	if ids := ids(b.list()); !slices.Equal(ids, []string{"a:b:four", "a:b:two"}) {
		t.Fatalf("kept %v", ids)
	}
}

func ids(bs []Breaker) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.AgentID)
	}
	return out
}

// Retry: a retryable refusal is asked again after the backoff (honouring retry_after);
// a final one is not; Codes narrows what is retried.
func TestCall_RetriesWhatTheRegistrySaysIsRetryable(t *testing.T) {
	var limited atomic.Int64 // how many more requests agent 1 refuses with RATE_LIMITED
	limited.Store(1)
	r := newRig(t, 3, rigOpts{handle: func(i int, req *node.Request) error {
		if i == 2 {
			return req.Fail(protocol.Errorf(protocol.CodePayloadInvalid, "bad"))
		}
		if limited.Add(-1) >= 0 {
			e := protocol.Errorf(protocol.CodeRateLimited, "slow down")
			e.RetryAfter = 50 * time.Millisecond
			return req.Fail(e)
		}
		return req.Reply(protocol.ResponseAccepted, nil)
	}})
	c := r.coordinator(t)
	ctx := testCtx(t, 20*time.Second)
	fast := RetryPolicy{Attempts: 3, Min: time.Millisecond, Max: 100 * time.Millisecond}
	if a := c.Call(ctx, agentName(1), query, CallOptions{Retry: fast}); a.Err != nil || a.Attempts != 2 {
		t.Fatalf("%v after %d attempts, want success at the 2nd (hits %d)", a.Err, a.Attempts, r.hits[1].Load())
	}
	if a := c.Call(ctx, agentName(2), query, CallOptions{Retry: fast}); a.Code() != protocol.CodePayloadInvalid || a.Attempts != 1 {
		t.Fatalf("%v after %d attempts, want PAYLOAD_INVALID at once", a.Err, a.Attempts)
	}
	limited.Store(1)
	only := fast
	only.Codes = []protocol.Code{protocol.CodeTimeout}
	if a := c.Call(ctx, agentName(1), query, CallOptions{Retry: only}); a.Code() != protocol.CodeRateLimited || a.Attempts != 1 {
		t.Fatalf("%v after %d attempts, want RATE_LIMITED not retried", a.Err, a.Attempts)
	}
	if err := (RetryPolicy{Codes: []protocol.Code{"NOPE"}}).Validate(); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("unknown code: %v", err)
	}
}

func TestRetryPolicy_DelayHonoursRetryAfterAndJitter(t *testing.T) {
	p := RetryPolicy{Min: 100 * time.Millisecond, Max: time.Second, NoJitter: true}
	if d := p.delay(3, nil, globalRand{}); d != 400*time.Millisecond {
		t.Fatalf("3rd delay %s, want 400ms without jitter", d)
	}
	e := &protocol.Error{Code: protocol.CodeRateLimited, RetryAfter: 700 * time.Millisecond}
	if d := p.delay(1, e, globalRand{}); d != 700*time.Millisecond {
		t.Fatalf("delay %s, want retry_after 700ms", d)
	}
	e.RetryAfter = time.Hour
	if d := p.delay(1, e, globalRand{}); d != time.Second {
		t.Fatalf("delay %s, want retry_after capped at max 1s", d)
	}
	p.NoJitter = false
	for range 100 {
		if d := p.delay(2, nil, globalRand{}); d < 100*time.Millisecond || d > 200*time.Millisecond {
			t.Fatalf("jittered delay %s outside [100ms, 200ms]", d)
		}
	}
}
