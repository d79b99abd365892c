package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as "250ms", "5s" or "1m" in scenarios.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: a duration is a string like \"250ms\" or \"5s\"", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like \"250ms\" or \"5s\"", n.Line, s)
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %q is negative", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText writes the duration string (JSON reports).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Range is an interval of durations, drawn from uniformly.
type Range struct {
	Min Duration `yaml:"min" json:"min"`
	Max Duration `yaml:"max" json:"max"`
}

func (r Range) validate(field string) error {
	if r.Max < r.Min {
		return fmt.Errorf("%s: max %s is below min %s", field, r.Max, r.Min)
	}
	return nil
}

// UnmarshalText reads the duration string (JSON reports).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like \"250ms\" or \"5s\"", b)
	}
	*d = Duration(v)
	return nil
}

// Bytes is a size written as "7GiB", "512MiB", "64KiB" or a plain number of bytes.
type Bytes int64

// UnmarshalYAML reads a size with a binary unit.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: a size is a string like \"7GiB\" or \"512MiB\"", n.Line)
	}
	v, err := ParseBytes(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// ParseBytes reads "7GiB", "512MiB", "64KiB" or a number of bytes.
func ParseBytes(s string) (Bytes, error) {
	num, mul := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mul = strings.TrimSpace(rest), u.mul
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size like \"7GiB\", \"512MiB\" or \"64KiB\"", s)
	}
	return Bytes(v * float64(mul)), nil
}

// String formats the size in GiB, MiB or KiB.
func (b Bytes) String() string {
	switch {
	case b >= 1<<30:
		return strconv.FormatFloat(float64(b)/(1<<30), 'g', 4, 64) + "GiB"
	case b >= 1<<20:
		return strconv.FormatFloat(float64(b)/(1<<20), 'g', 4, 64) + "MiB"
	}
	return strconv.FormatFloat(float64(b)/(1<<10), 'g', 4, 64) + "KiB"
}

// MarshalText writes the size (JSON reports).
func (b Bytes) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText reads the size (JSON reports).
func (b *Bytes) UnmarshalText(t []byte) error {
	v, err := ParseBytes(string(t))
	*b = v
	return err
}
