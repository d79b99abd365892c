package cli

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The first interrupt stops the run (the nodes then close in order, which takes a while in a
// large mesh) and says so; the next one is left to the runtime, which ends the process.
func TestSimStopsOnFirstInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	stopOnInterrupt(ctx, cancel, &out)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupt did not stop the run")
	}
	if !strings.Contains(out.String(), "interrupt again to quit at once") {
		t.Fatalf("no word of the interrupt: %q", out.String())
	}
}
