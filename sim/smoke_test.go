package sim

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestSmokeScenario(t *testing.T) {
	sc, err := Builtin(DefaultScenario)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, sc, WithProgress(os.Stderr))
	if err != nil {
		t.Fatal(err)
	}
	rep.WriteText(os.Stderr)
	if !rep.Passed {
		t.Fatal("smoke scenario failed")
	}
}
