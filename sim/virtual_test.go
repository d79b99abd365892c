package sim

import (
	"testing"
	"testing/synctest"
)

// inBubble is the Bubble of a test: synctest's.
func inBubble(t *testing.T) Bubble {
	return func(f func(*testing.T)) { synctest.Test(t, f) }
}
