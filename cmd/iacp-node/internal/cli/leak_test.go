package cli_test

import (
	"testing"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"go.uber.org/goleak"
)

// noLeaks returns the check, to run when t ends, that no goroutine t started outlives it.
// Goroutines already running when t began belong to an earlier test (a mocknet stream opened
// while an earlier test's nodes closed can outlive them: testsupport.MocknetPipes), mocknet's
// own blocked pipes are not ours either, and neither are the process-wide workers. Call it
// at the start of t: t.Cleanup(noLeaks(t)), registered first so that it runs last.
func noLeaks(t *testing.T) func() {
	opts := append([]goleak.Option{goleak.IgnoreCurrent()}, testsupport.MocknetPipes()...)
	opts = append(opts, testsupport.ProcessWorkers()...)
	return func() { goleak.VerifyNone(t, opts...) }
}
