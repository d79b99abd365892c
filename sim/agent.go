package sim

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// offlinePrefix marks the events of the offline step.
const offlinePrefix = "sim.offline."

// drawCapabilities draws between PerAgent.Min and PerAgent.Max distinct capabilities,
// each with a chance proportional to its weight (weighted sampling without replacement).
func drawCapabilities(r *rand.Rand, a AgentSpec) []CapabilityWeight {
	n := a.PerAgent.Min + r.IntN(a.PerAgent.Max-a.PerAgent.Min+1)
	pool := append([]CapabilityWeight(nil), a.Capabilities...)
	var out []CapabilityWeight
	for len(out) < n && len(pool) > 0 {
		total := 0.0
		for _, c := range pool {
			total += c.Weight
		}
		x := r.Float64() * total
		k := 0
		for k < len(pool)-1 && x >= pool[k].Weight {
			x -= pool[k].Weight
			k++
		}
		out = append(out, pool[k])
		pool = append(pool[:k], pool[k+1:]...)
	}
	return out
}

// manifestOf builds the agent's manifest from its capabilities.
func manifestOf(sn *simNode) protocol.Manifest {
	m := protocol.Manifest{Name: "sim agent " + sn.agentID, Version: "sim"}
	for _, c := range sn.caps {
		switch c.Kind {
		case "model":
			m.Models = append(m.Models, c.Name)
		case "domain":
			m.Domains = append(m.Domains, c.Name)
		default:
			m.Tools = append(m.Tools, c.Name)
		}
	}
	return m
}

// workPayload is what load requests carry: how long the synthetic agent works before it
// answers (drawn by the load generator from the agent's handler_delay, so that the seeded
// source decides it).
type workPayload struct {
	DelayMS float64 `json:"delay_ms"`
	// Mark, when set, is counted as a delivery too (recorder.expectDelivery): the workflow
	// step counts each step's runs by it, whatever request carried it.
	Mark string `json:"mark,omitempty"`
}

// agentHandlers returns the synthetic agent's handlers, as options of its node, so that they
// are in place before the node serves (an event reaching a restarting node before a later
// Handle would be taken as it is, the simulated nodes having no inbox, and count as lost):
// handoff requests are answered "accepted" after the requested delay; notify events are
// counted as delivered. Every message a handler takes is counted too when a step registered
// its id (recorder.expectDelivery): what an agent acted on.
func agentHandlers(sn *simNode, rec *recorder) []node.Option {
	return []node.Option{node.WithHandler(protocol.IntentHandoff, func(ctx context.Context, r *node.Request) error {
		rec.deliver(r.Msg.Envelope.MessageID)
		var p workPayload
		if err := protocol.DecodePayload(r.Msg, &p); err != nil {
			return r.Fail(err)
		}
		if p.Mark != "" {
			rec.deliver(p.Mark)
		}
		if p.DelayMS > 0 {
			t := time.NewTimer(time.Duration(p.DelayMS * float64(time.Millisecond)))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		return r.Reply(protocol.ResponseAccepted, map[string]any{"agent": sn.agentID})
	}), node.WithHandler(protocol.IntentNotify, func(_ context.Context, r *node.Request) error {
		rec.deliver(r.Msg.Envelope.MessageID) // the offline and intruder steps' events
		return nil
	})}
}

// has reports whether the slot has the capability name.
func (sn *simNode) has(name string) bool {
	for _, c := range sn.caps {
		if strings.EqualFold(c.Name, name) {
			return true
		}
	}
	return false
}
