package testsupport

import (
	"testing"
	"time"
)

// Poll bounds how often WaitFor asks: first after minPoll, then twice as long each time up
// to maxPoll, so a condition that holds soon is seen soon and a long wait does not spin.
const (
	minPoll = 5 * time.Millisecond
	maxPoll = 20 * time.Millisecond
)

// WaitFor polls cond until it holds, and fails the test if it does not within the given
// time: "timed out after 10s waiting for <what>". Call it from the test's goroutine.
func WaitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	poll := minPoll
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(poll)
		poll = min(2*poll, maxPoll)
	}
}
