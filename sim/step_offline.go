package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

type offlineParams struct {
	// Messages is how many events are sent to the agent while it is down (default 5).
	Messages int `yaml:"messages"`
	// Node is the agent's slot (default -1: a random running non-bootstrap node).
	Node int `yaml:"node"`
	// Down is how long it stays down after the sends (default 1s).
	Down Duration `yaml:"down"`
	// Mode is how it goes down: crash (default) or graceful.
	Mode string `yaml:"mode"`
	// SendTimeout bounds each Send (default 3s); Timeout bounds the wait for every message
	// to arrive once the agent is back (default: the nodes' retry_max and 10 s more, at
	// least 30 s; see defaultOfflineWait).
	SendTimeout Duration `yaml:"send_timeout"`
	Timeout     Duration `yaml:"timeout"`
}

// defaultOfflineWait is how long the offline step waits by default for the messages once the
// agent is back. A sender retries at once when it hears of the return (a connection, the
// agent seen alive again, or a beat of it after a failed attempt); one that hears none of
// these (gossip off, beats lost) retries on its backoff, at most retry_max apart. A shorter
// wait would count such a message lost when it is only late.
func defaultOfflineWait(sc *Scenario) Duration {
	return Duration(max(30*time.Second, sc.Node.RetryMax.D()+10*time.Second))
}

var parseOffline = params(offlineParams{Messages: 5, Node: -1, Down: Duration(time.Second), Mode: ModeCrash,
	SendTimeout: Duration(3 * time.Second)}, func(p *offlineParams, sc *Scenario) error {
	if p.Timeout == 0 {
		p.Timeout = defaultOfflineWait(sc)
	}
	if p.Messages < 1 || p.Messages > 10000 {
		return fmt.Errorf("offline: messages %d is outside 1..10000", p.Messages)
	}
	if p.Node >= sc.Nodes || p.Node < -1 {
		return fmt.Errorf("offline: node %d is outside -1..%d", p.Node, sc.Nodes-1)
	}
	if p.SendTimeout.D() <= 0 || p.Timeout.D() <= 0 {
		return fmt.Errorf("offline: send_timeout and timeout must be positive")
	}
	return checkMode(p.Mode)
})

// offlineMsg is one message to the offline agent and what became of it.
type offlineMsg struct {
	from     int
	m        *protocol.Message
	accepted bool // the sender's node took responsibility (Send returned nil)
}

// runOffline stops an agent, sends it events from random running nodes, restarts it and
// waits for the events to arrive. Send either takes the message (it returns nil: with durable
// delivery, once the message is stored; without, only after the recipient's receipt) or
// refuses it (recipient unreachable). A refused message is sent again by the simulated
// sender, as an agent would, every 250 ms once the recipient is back; a taken one is the
// node's to deliver, and is not sent again. lost counts the messages that never arrived:
// it must be 0 either way.
func runOffline(ctx context.Context, r *run, p any, res *StepResult) error {
	op := p.(*offlineParams)
	c := r.c
	target := op.Node
	if target < 0 {
		v := c.pick(1)
		if len(v) == 0 {
			return fmt.Errorf("offline: no running non-bootstrap node to stop")
		}
		target = v[0]
	}
	if err := c.stopNode(target, op.Mode == ModeCrash); err != nil {
		return err
	}
	up := c.up()
	msgs := make([]*offlineMsg, op.Messages)
	for k := range msgs {
		msgs[k] = &offlineMsg{from: up[c.rng.IntN(len(up))]}
	}
	if err := c.sendWhileDown(ctx, op, c.slots[target].agentID, msgs, res); err != nil {
		return err
	}
	refused := sumErrors(res.Errors)
	sleep(ctx, op.Down.D())
	t0 := time.Now()
	if err := c.startNode(ctx, target); err != nil {
		return err
	}
	retried := c.awaitOffline(ctx, op, msgs, res)
	delivered, dup := 0, 0
	for _, om := range msgs {
		if om.m == nil {
			continue
		}
		if n := c.rec.deliveries(om.m.Envelope.MessageID); n > 0 {
			delivered++
			dup += n - 1
		}
	}
	res.Metrics["offline_sent"] = float64(len(msgs))
	res.Metrics["offline_taken_while_down"] = float64(len(msgs)) - refused
	res.Metrics["offline_retries"] = float64(retried)
	res.Metrics["offline_delivered"] = float64(delivered)
	res.Metrics["offline_duplicates"] = float64(dup)
	res.Metrics["offline_delivery_ms"] = ms(time.Since(t0))
	res.Metrics["lost"] = float64(len(msgs) - delivered)
	c.explainLost(msgs, res)
	return ctx.Err()
}

// explainLost says where each message that did not arrive is: still queued at its sender
// (LOST_QUEUED_AT_SENDER; the simulator logs, at warn, its attempts and last error), or not
// (LOST_NOT_QUEUED: refused for good, or taken by the recipient's node without reaching a
// handler: the simulated nodes have no inbox, so an event that finds no handler is taken as
// it is).
func (c *cluster) explainLost(msgs []*offlineMsg, res *StepResult) {
	for _, om := range msgs {
		if om.m == nil || c.rec.deliveries(om.m.Envelope.MessageID) > 0 {
			continue
		}
		id, to := om.m.Envelope.MessageID, om.m.Envelope.Recipient.AgentID
		queued := false
		if nd := c.node(om.from); nd != nil {
			entries, _ := nd.OutboxEntries()
			for _, e := range entries {
				if e.MessageID == id {
					queued = true
					c.log.Warn("offline: a message is still queued at its sender", "id", id, "sender", om.from, "to", to,
						"attempts", e.Attempts, "last_error", e.LastError, "next_attempt_in", time.Until(e.NextAttemptAt).Round(time.Millisecond))
				}
			}
		}
		if queued {
			res.Errors["LOST_QUEUED_AT_SENDER"]++
		} else {
			res.Errors["LOST_NOT_QUEUED"]++
			c.log.Warn("offline: a message is not queued at its sender and did not reach the agent", "id", id, "sender", om.from,
				"to", to, "taken_by_sender", om.accepted)
		}
	}
}

// sendWhileDown sends each message to agent, which is down, from its node; a message its
// node takes (durable delivery) is accepted, a refusal is counted by code.
func (c *cluster) sendWhileDown(ctx context.Context, op *offlineParams, agent string, msgs []*offlineMsg, res *StepResult) error {
	for k, om := range msgs {
		nd := c.node(om.from)
		if nd == nil {
			continue
		}
		m, err := nd.Builder().Event(agent, protocol.IntentNotify,
			protocol.EventPayload{EventType: fmt.Sprintf("%s%d.%d", offlinePrefix, res.Index, k)})
		if err != nil {
			return err
		}
		om.m = m
		c.rec.expectDelivery(m.Envelope.MessageID)
		sctx, cancel := context.WithTimeout(ctx, op.SendTimeout.D())
		err = nd.Send(sctx, m)
		cancel()
		if err == nil {
			om.accepted = true
		} else {
			res.Errors[codeOf(err)]++
		}
	}
	return nil
}

// awaitOffline waits, up to the step's timeout, until every message arrived, sending again
// those their node did not take (as an agent without durable delivery must), and returns how
// many sends it retried.
func (c *cluster) awaitOffline(ctx context.Context, op *offlineParams, msgs []*offlineMsg, res *StepResult) (retried int) {
	deadline := time.Now().Add(op.Timeout.D())
	for ctx.Err() == nil && time.Now().Before(deadline) {
		pending := 0
		for _, om := range msgs {
			if om.m == nil || c.rec.deliveries(om.m.Envelope.MessageID) > 0 {
				continue
			}
			pending++
			if om.accepted {
				continue // the node owns it now
			}
			if nd := c.node(om.from); nd != nil {
				sctx, cancel := context.WithTimeout(ctx, op.SendTimeout.D())
				if err := nd.Send(sctx, om.m); err == nil {
					om.accepted = true
				} else {
					res.Errors["RETRY_"+codeOf(err)]++
				}
				cancel()
				retried++
			}
		}
		if pending == 0 {
			break
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return retried
}

func sumErrors(m map[string]int) float64 {
	n := 0
	for _, v := range m {
		n += v
	}
	return float64(n)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
