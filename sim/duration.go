package sim

import (
	"fmt"
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
