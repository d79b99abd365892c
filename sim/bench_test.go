package sim

import (
	"context"
	"os"
	"testing"
	"time"
)

// benchScenario runs a library scenario once per iteration and reports its key numbers.
func benchScenario(b *testing.B, name string) {
	sc, err := Builtin(name)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		rep, err := Run(ctx, sc, WithProgress(os.Stderr))
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		_ = rep.WriteText(os.Stderr)
		b.ReportMetric(rep.PeakHeapPerNodeMiB, "peak-heap-MiB/node")
		for _, s := range rep.Steps {
			if v, ok := s.Metrics["converge_ms"]; ok {
				b.ReportMetric(v, "converge-ms")
			}
			if v, ok := s.Metrics["request_p99_ms"]; ok {
				b.ReportMetric(v, "request-p99-ms")
			}
		}
		b.ReportMetric(rep.DurationMS/1000, "run-s")
	}
}

// BenchmarkMesh100 runs scenarios/mesh-100.yaml: 100 nodes through every step.
func BenchmarkMesh100(b *testing.B) { benchScenario(b, "mesh-100") }

// BenchmarkMesh1000 runs scenarios/mesh-1000.yaml; it takes many minutes and GiBs, so it runs
// only with SIM_BIG=1.
func BenchmarkMesh1000(b *testing.B) {
	if os.Getenv("SIM_BIG") == "" {
		b.Skip("set SIM_BIG=1 to run the 1000-node scenario")
	}
	benchScenario(b, "mesh-1000")
}
