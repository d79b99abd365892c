package sim

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// inBubble is the Bubble of a test: synctest's.
func inBubble(t *testing.T) Bubble {
	return func(f func(*testing.T)) { synctest.Test(t, f) }
}

func TestVirtual_Smoke(t *testing.T) {
	sc, err := Builtin("smoke")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	var progress bytes.Buffer
	rep, err := Run(ctx, sc, WithProgress(&progress), WithLogger(testLogger(t)), WithVirtualTime(inBubble(t)))
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	_ = rep.WriteText(&table)
	t.Log(table.String(), rep.WallMS)
}
