package sim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// condition is one parsed expectation: the metric must compare to val by op.
type condition struct {
	op  string // one of <=, >=, <, >, ==, !=
	val float64
}

func (c condition) String() string { return c.op + " " + strconv.FormatFloat(c.val, 'g', -1, 64) }

// holds reports whether got satisfies the condition. Equality allows for float rounding.
func (c condition) holds(got float64) bool {
	const eps = 1e-9
	switch c.op {
	case "<=":
		return got <= c.val+eps
	case ">=":
		return got >= c.val-eps
	case "<":
		return got < c.val
	case ">":
		return got > c.val
	case "!=":
		return math.Abs(got-c.val) > eps
	}
	return math.Abs(got-c.val) <= eps
}

// parseCondition reads an expectation value: a number or boolean (equality), or a string
// "<op> <number>".
func parseCondition(v any) (condition, error) {
	switch x := v.(type) {
	case int:
		return condition{"==", float64(x)}, nil
	case float64:
		return condition{"==", x}, nil
	case bool:
		if x {
			return condition{"==", 1}, nil
		}
		return condition{"==", 0}, nil
	case string:
		s := strings.TrimSpace(x)
		for _, op := range []string{"<=", ">=", "==", "!=", "<", ">"} {
			if rest, ok := strings.CutPrefix(s, op); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				if err != nil {
					return condition{}, fmt.Errorf("%q: after %q comes a number, like \"%s 50\"", x, op, op)
				}
				return condition{op, f}, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return condition{}, fmt.Errorf("%q is not a condition; write a number or \"<= 50\", \">= 0.99\", \"== 0\"", x)
		}
		return condition{"==", f}, nil
	}
	return condition{}, fmt.Errorf("%v (%T) is not a condition; write a number or \"<= 50\"", v, v)
}

// Check is one expectation and its outcome.
type Check struct {
	Metric string  `json:"metric"`
	Want   string  `json:"want"`
	Got    float64 `json:"got"`
	// Missing is true when the step did not measure the metric (a typo, or the wrong step).
	Missing bool `json:"missing,omitempty"`
	OK      bool `json:"ok"`
	// Excused says why a failed expectation counts as held: false suspicions of a step during
	// which the simulator itself was overloaded, with the figures.
	Excused string `json:"excused,omitempty"`
}

// evaluate checks every expectation of a step against its metrics, in metric order.
func evaluate(expect map[string]any, metrics map[string]float64) []Check {
	keys := make([]string, 0, len(expect))
	for k := range expect {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Check, 0, len(keys))
	for _, k := range keys {
		c, _ := parseCondition(expect[k]) // validated when the scenario was parsed
		got, ok := metrics[k]
		out = append(out, Check{Metric: k, Want: c.String(), Got: got, Missing: !ok, OK: ok && c.holds(got)})
	}
	return out
}
