package dialect

import (
	"strings"

	"github.com/iacp-node/iacp-node/protocol"
)

// Names lists the dialects an agent may speak: protocol.Dialects, IACP first.
func Names() []Dialect {
	var out []Dialect
	for _, d := range protocol.Dialects() {
		out = append(out, Dialect(d.Name))
	}
	return out
}

// Parse reads a dialect's name as a user writes it (a config file, a flag, ?dialect=): one of
// Names, or "" for IACP. Anything else is PAYLOAD_INVALID naming the ones there are.
func Parse(name string) (Dialect, error) {
	if name == "" {
		return IACP, nil
	}
	var names []string
	for _, d := range Names() {
		if string(d) == name {
			return d, nil
		}
		names = append(names, string(d))
	}
	return "", protocol.Errorf(protocol.CodePayloadInvalid, "dialect %q is unknown: use one of %s", name, strings.Join(names, ", "))
}

// Expressible reports, as FromIACP would, why msg cannot reach an agent that speaks d: nil
// when it can, a CAPABILITY_MISMATCH naming what d has no shape for otherwise. Every message
// is expressible in IACP.
func Expressible(msg *protocol.Message, d Dialect) error {
	if d == IACP || d == "" {
		return nil
	}
	_, err := FromIACP(msg, d)
	return err
}
