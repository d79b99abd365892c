package sim

import (
	"math"
	"slices"
	"time"
)

// samples collects durations and summarises them. Not safe for concurrent use.
type samples []float64 // milliseconds

func (s *samples) add(d time.Duration) { *s = append(*s, float64(d)/float64(time.Millisecond)) }

// quantile returns the q-quantile (0..1) by the nearest-rank method; 0 when empty.
func (s samples) quantile(q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[max(0, min(i, len(c)-1))]
}

func (s samples) max() float64 {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

// put writes prefix_p50_ms, prefix_p99_ms and prefix_max_ms into m (nothing when empty, so
// that an expectation on a latency nobody measured fails as missing).
func (s samples) put(m map[string]float64, prefix string) {
	if len(s) == 0 {
		return
	}
	m[prefix+"_p50_ms"] = round3(s.quantile(0.50))
	m[prefix+"_p99_ms"] = round3(s.quantile(0.99))
	m[prefix+"_max_ms"] = round3(s.max())
}

// cdf returns at most n points (value, cumulative fraction) of the empirical distribution.
func (s samples) cdf(n int) []Point {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	slices.Sort(c)
	step := max(1, len(c)/n)
	var out []Point
	for i := 0; i < len(c); i += step {
		out = append(out, Point{X: c[i], Y: float64(i+1) / float64(len(c))})
	}
	if last := c[len(c)-1]; out[len(out)-1].X != last || out[len(out)-1].Y != 1 {
		out = append(out, Point{X: last, Y: 1})
	}
	return out
}

func ratio(num, den int) float64 {
	if den == 0 {
		return 1
	}
	return round3(float64(num) / float64(den))
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }
