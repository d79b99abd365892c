package sim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// What an intruder holds (intruderParams.Certificate).
const (
	// CertNone: no certificate at all; the intruder runs in open mode, as a peer outside the
	// mesh would.
	CertNone = "none"
	// CertExpired: a certificate of the mesh that expired 40 s ago (see startIntruder).
	CertExpired = "expired"
	// CertRevoked: a certificate it got by joining with an invitation from node 0, as any
	// member does, and which node 0 then revokes (Node.Revoke, as `iacp-node revoke` does)
	// before the intruder sends anything; the step waits until every running node holds the
	// new revocation list, and reports how long that took (revocation_applied_ms).
	CertRevoked = "revoked"
)

type intruderParams struct {
	// Certificate is what the intruder holds: none (default), expired or revoked.
	Certificate string `yaml:"certificate"`
	// As is the slot whose agent id the intruder claims (default -1: an id of its own,
	// sim:intruder:step<N>).
	As int `yaml:"as"`
	// Messages is how many requests and how many events it sends each running agent
	// (default 2); a certified control node sends as many.
	Messages int `yaml:"messages"`
	// Broadcasts is how many broadcasts it sends (default 2).
	Broadcasts int `yaml:"broadcasts"`
	// Timeout bounds each send, the wait for the intruder's first gossip peer and the wait
	// for the control's messages (default 10s).
	Timeout Duration `yaml:"timeout"`
	// Observe is how long at least the intruder runs once it has a gossip peer, so that its
	// heartbeats have their chance to make a node bind its agent id to it (default: one
	// heartbeat interval and 250 ms).
	Observe Duration `yaml:"observe"`
}

var parseIntruder = params(intruderParams{Certificate: CertNone, As: -1, Messages: 2, Broadcasts: 2, Timeout: Duration(10 * time.Second)},
	func(p *intruderParams, sc *Scenario) error {
		switch {
		case sc.Trust != node.TrustAuthority:
			return fmt.Errorf("intruder: needs trust: authority; in open mode a peer without a certificate is trusted on first use")
		case p.Certificate != CertNone && p.Certificate != CertExpired && p.Certificate != CertRevoked:
			return fmt.Errorf("intruder: certificate %q is none of %q, %q and %q", p.Certificate, CertNone, CertExpired, CertRevoked)
		case p.Certificate == CertRevoked && p.As == 0:
			return fmt.Errorf("intruder: a revoked intruder cannot claim node 0's agent id: node 0 is the authority's node, which revokes it")
		case p.As < -1 || p.As >= sc.Nodes:
			return fmt.Errorf("intruder: as %d is outside -1..%d", p.As, sc.Nodes-1)
		case p.Messages < 0 || p.Messages > 1000 || p.Broadcasts < 0 || p.Broadcasts > 1000:
			return fmt.Errorf("intruder: messages and broadcasts must be 0..1000")
		case p.Messages+p.Broadcasts == 0:
			return fmt.Errorf("intruder: it sends nothing (messages and broadcasts are 0)")
		case p.Timeout.D() <= 0 || p.Observe < 0:
			return fmt.Errorf("intruder: timeout must be positive and observe not negative")
		case sc.Node.Gossip != nil && !*sc.Node.Gossip && p.Broadcasts > 0:
			return fmt.Errorf("intruder: broadcasts need gossip (node.gossip: true)")
		}
		if p.Observe == 0 {
			p.Observe = Duration(sc.Node.HeartbeatInterval.D() + 250*time.Millisecond)
		}
		return nil
	})

// runIntruder starts a node that holds no valid certificate of the mesh, tells it where every
// running agent is, and has it send requests and events to each and broadcasts to all. A
// certified node then sends the same as a control. It measures what the intruder got acted
// on (must be nothing), what was refused and whether each refusal names its rule.
func runIntruder(ctx context.Context, r *run, p any, res *StepResult) error {
	ip := p.(*intruderParams)
	c := r.c
	up := c.up()
	if len(up) < 2 {
		return fmt.Errorf("intruder: needs two running nodes (one to send the control)")
	}
	in, err := c.startIntruder(ctx, res.Index, ip)
	if err != nil {
		return err
	}
	defer c.stopIntruder(in)
	if err := c.introduce(ctx, in, up, ip.Timeout.D()); err != nil {
		return err
	}
	if in.cert != nil {
		if err := c.revoke(ctx, in, up, ip.Timeout.D(), res); err != nil {
			return err
		}
	}
	started := time.Now()
	var t tally
	if err := c.intruderSends(ctx, in, ip, up, res, &t); err != nil {
		return err
	}
	c.intruderBroadcasts(ctx, in, ip, res, &t)
	ctl := c.control(ctx, res, ip, up)
	// Its heartbeats had their chance (observe) after it had a gossip peer.
	if rest := ip.Observe.D() - time.Since(started); rest > 0 && c.gossipOn() {
		sleepCtx(ctx, rest)
	}
	c.judge(in, up, &t, res)
	res.Metrics["control_acted_ratio"] = ctl
	return ctx.Err()
}

// tally is what one intruder sent and what came of it.
type tally struct {
	sent, refused, named int
	rules                map[string]int // refusals by the rule they name
	ids                  []string       // its direct messages
	keys                 []string       // its broadcasts' event types
	unsent               int            // broadcasts its own node would not publish
}

// intruderSends sends every running agent but the one the intruder claims to be its
// requests and events, one attempt each, and counts the refusals and the rules they name. It
// fails only when a message cannot even be built.
func (c *cluster) intruderSends(ctx context.Context, in *intruder, ip *intruderParams, up []int, res *StepResult, t *tally) error {
	t.rules = map[string]int{}
	for _, j := range up {
		if j == ip.As {
			continue
		}
		for k := 0; k < 2*ip.Messages && ctx.Err() == nil; k++ {
			id, err := c.sendOne(ctx, in.nd, c.slots[j].agentID, k%2 == 0, ip.Timeout.D())
			if id == "" {
				return fmt.Errorf("intruder: building its message: %w", err)
			}
			t.ids = append(t.ids, id)
			t.sent++
			if err == nil {
				continue
			}
			t.refused++
			res.Errors[codeOf(err)]++
			if rule := ruleOf(err); rule != "" {
				t.named++
				t.rules[rule]++
			}
		}
	}
	return nil
}

// intruderBroadcasts has the intruder broadcast; a certified node's control broadcast follows
// (control): once every node heard it, the intruder's (sent first, on the same mesh) had their
// chance. A node whose certificate expired by its own clock, or was revoked, does not publish
// at all: its own gossip validator ignores what it holds no valid certificate for (unsent).
func (c *cluster) intruderBroadcasts(ctx context.Context, in *intruder, ip *intruderParams, res *StepResult, t *tally) {
	for k := 0; k < ip.Broadcasts && ctx.Err() == nil; k++ {
		key := fmt.Sprintf("sim.intruder.%d.%d", res.Index, k)
		c.rec.expect(key)
		t.keys = append(t.keys, key)
		bctx, cancel := context.WithTimeout(ctx, ip.Timeout.D())
		_, err := in.nd.Broadcast(bctx, protocol.EventPayload{EventType: key, Detail: "intruder"})
		cancel()
		if err != nil {
			t.unsent++
			c.log.Debug("the intruder's broadcast did not leave it", "err", err.Error())
		}
	}
}

// judge counts what of the intruder's was acted on, and on how many nodes its agent id is
// bound to it, and writes the step's metrics.
func (c *cluster) judge(in *intruder, up []int, t *tally, res *StepResult) {
	acted, heard := 0, 0
	for _, id := range t.ids {
		acted += min(1, c.rec.deliveries(id))
	}
	for _, key := range t.keys {
		heard += len(c.rec.receipts(key, true))
	}
	knownBy := 0
	for _, j := range up {
		if nd := c.node(j); nd != nil {
			if a, ok := nd.Agent(in.agentID); ok && a.PeerID == in.nd.ID() {
				knownBy++
			}
		}
	}
	res.Metrics["intruder_sent"] = float64(t.sent)
	res.Metrics["intruder_broadcasts"] = float64(len(t.keys))
	res.Metrics["broadcasts_unsent"] = float64(t.unsent)
	res.Metrics["refused"] = float64(t.refused)
	res.Metrics["refused_ratio"] = ratio(t.refused, t.sent)
	res.Metrics["named_ratio"] = ratio(t.named, t.refused)
	res.Metrics["acted_on"] = float64(acted + heard)
	res.Metrics["broadcasts_heard"] = float64(heard)
	res.Metrics["bound_to_intruder"] = float64(knownBy)
	for rule, n := range t.rules {
		res.Metrics["rule_"+rule] = ratio(n, t.refused)
	}
}

// sendOne sends agentID one request (request true) or one event from nd and returns its id
// and the outcome; the id is "" when the message could not even be built.
func (c *cluster) sendOne(ctx context.Context, nd *node.Node, agentID string, request bool, timeout time.Duration) (string, error) {
	var m *protocol.Message
	var err error
	if request {
		m, err = nd.Builder().Request(agentID, protocol.IntentHandoff, workPayload{})
	} else {
		m, err = nd.Builder().Event(agentID, protocol.IntentNotify, protocol.EventPayload{EventType: "sim.intruder.direct"})
	}
	if err != nil {
		return "", err
	}
	c.rec.expectDelivery(m.Envelope.MessageID)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if request {
		_, err = nd.Request(sctx, m)
	} else {
		err = nd.Send(sctx, m)
	}
	return m.Envelope.MessageID, err
}

// control has a certified running node send what the intruder sent, to the same agents (and
// to the one the intruder claims to be), and returns the fraction acted on: 1 shows that what
// the intruder sent would have been acted on had it held a valid certificate.
func (c *cluster) control(ctx context.Context, res *StepResult, ip *intruderParams, up []int) float64 {
	from := up[c.rng.IntN(len(up))]
	nd := c.node(from)
	var ids []string
	for _, j := range up {
		if j == from {
			continue
		}
		for k := 0; k < 2*ip.Messages; k++ {
			if id, err := c.sendOne(ctx, nd, c.slots[j].agentID, k%2 == 0, ip.Timeout.D()); id != "" {
				ids = append(ids, id)
			} else {
				c.log.Debug("control message", "err", err)
			}
		}
	}
	want := map[int]bool{}
	key := fmt.Sprintf("sim.intruder-control.%d", res.Index)
	if ip.Broadcasts > 0 && nd.GossipOn() {
		for _, j := range up {
			if j != from {
				want[j] = true
			}
		}
		c.rec.expect(key)
		bctx, cancel := context.WithTimeout(ctx, ip.Timeout.D())
		if _, err := nd.Broadcast(bctx, protocol.EventPayload{EventType: key, Detail: "control"}); err == nil {
			waitFor(bctx, func() bool { return countIn(c.rec.receipts(key, false), want) == len(want) })
		}
		cancel()
	}
	wctx, cancel := context.WithTimeout(ctx, ip.Timeout.D())
	defer cancel()
	acted := func() int {
		n := 0
		for _, id := range ids {
			n += min(1, c.rec.deliveries(id))
		}
		return n
	}
	waitFor(wctx, func() bool { return acted() == len(ids) })
	got := acted() + countIn(c.rec.receipts(key, true), want)
	return ratio(got, len(ids)+len(want))
}

// certChecks are the checks of an agent certificate, as authority.Verifier names them.
var certChecks = []authority.Check{authority.CheckSize, authority.CheckParse, authority.CheckAlg, authority.CheckType,
	authority.CheckSignature, authority.CheckIssuer, authority.CheckNotBefore, authority.CheckExpiry, authority.CheckSubject,
	authority.CheckConfirmation, authority.CheckRevoked}

// certCheckRE finds the check a refused certificate failed: "certificate of agent <id>:
// <check>: ...".
var certCheckRE = func() *regexp.Regexp {
	alt := make([]string, len(certChecks))
	for i, ch := range certChecks {
		alt[i] = regexp.QuoteMeta(string(ch))
	}
	return regexp.MustCompile(`certificate of agent \S+: (` + strings.Join(alt, "|") + `): `)
}()

// ruleOf returns the trust rule a refusal names, as the refused sender reads it (code and
// text of the error it got back), or "" when it names none: the certificate check that failed
// (expired, revoked, cnf, ...; spaces become _), "no_certificate" when the peer had none to
// show, "other_agent" when its certificate is for another agent id.
func ruleOf(err error) string {
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeIdentityInvalid && pe.Code != protocol.CodePermissionDenied {
		return ""
	}
	if m := certCheckRE.FindStringSubmatch(pe.Message); m != nil {
		return strings.ReplaceAll(m[1], " ", "_")
	}
	switch {
	case strings.Contains(pe.Message, "was revoked"):
		return string(authority.CheckRevoked)
	case strings.Contains(pe.Message, "has no valid certificate"):
		return "no_certificate"
	case strings.Contains(pe.Message, "is certified for agent"):
		return "other_agent"
	}
	return ""
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
