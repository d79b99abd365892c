package sim

import (
	"bytes"
	"testing"
	"time"
)

// The flight recorder's window is written once, at the first lateness at or past the
// threshold, as an execution trace that go tool trace reads.
func TestStallTrace_WritesTheWindowAtTheFirstStall(t *testing.T) {
	var out bytes.Buffer
	s, err := startStallTracer(&out, time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	s.observe(999 * time.Millisecond)
	if out.Len() != 0 {
		t.Fatalf("a lateness below the threshold wrote %d bytes", out.Len())
	}
	s.observe(1500 * time.Millisecond)
	written := out.Len()
	if written == 0 || !bytes.HasPrefix(out.Bytes(), []byte("go 1.")) {
		t.Fatalf("the stall wrote %d bytes, starting %q; want an execution trace", written, out.Bytes()[:min(written, 8)])
	}
	s.observe(3 * time.Second)
	late, at, err := s.stop()
	if err != nil || late != 1500*time.Millisecond || at.IsZero() || out.Len() != written {
		t.Fatalf("stop: late %s at %v, %v, %d bytes then %d; want the first stall only, written once", late, at, err, written, out.Len())
	}
	if _, err := Sweep(t.Context(), &Scenario{Steps: []Step{{Action: "sleep"}}}, []int{2, 3}, WithStallTrace(&out, 0, "")); err == nil {
		t.Fatal("a sweep took a stall trace")
	}
}

// With a step named, only a stall during that step is written: the join of a large mesh
// stalls the process too, and would otherwise be the first.
func TestStallTrace_FollowsItsStep(t *testing.T) {
	var out bytes.Buffer
	s, err := startStallTracer(&out, time.Second, "churn")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	s.observe(2 * time.Second) // the join
	s.during(&Step{Name: "settle"})()
	if out.Len() != 0 {
		t.Fatal("a stall outside the step was written")
	}
	end := s.during(&Step{Name: "churn"})
	s.observe(2 * time.Second)
	end()
	if out.Len() == 0 {
		t.Fatal("the stall during the step was not written")
	}
}
