package protocol_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain proves that the package starts no goroutine that outlives a test: protocol owns
// none, and the tests that start their own wait for them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
