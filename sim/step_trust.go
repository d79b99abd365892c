package sim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
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

// The expired intruder's clocks (startIntruder).
const (
	expiredAgo      = 40 * time.Second // its certificate expired this long ago
	expiredClockLag = 25 * time.Second // its clock is this far behind
)

// intruder is a node outside the scenario's slots, started by one intruder step.
type intruder struct {
	nd      *node.Node
	idx     int // its index on the mocknet, beyond the slots
	agentID string
	cert    *authority.Certificate // what it got by joining, to be revoked; nil for the others
}

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
	in, err := c.startIntruder(res.Index, ip)
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

	// The intruder's messages to every running agent but the one it claims to be.
	var sent, refused, named int
	rules := map[string]int{}
	var ids []string
	for _, j := range up {
		if j == ip.As {
			continue
		}
		for k := 0; k < 2*ip.Messages && ctx.Err() == nil; k++ {
			id, err := c.sendOne(ctx, in.nd, c.slots[j].agentID, k%2 == 0, ip.Timeout.D())
			if id == "" {
				return err // not even built
			}
			ids = append(ids, id)
			sent++
			if err == nil {
				continue
			}
			refused++
			res.Errors[codeOf(err)]++
			if rule := ruleOf(err); rule != "" {
				named++
				rules[rule]++
			}
		}
	}
	// Its broadcasts, then a certified node's: once every node heard the control, the
	// intruder's (sent first, on the same mesh) had their chance. A node whose certificate
	// expired by its own clock does not publish at all: its own gossip validator ignores what
	// it holds no valid certificate for (unsent).
	var keys []string
	unsent := 0
	for k := 0; k < ip.Broadcasts && ctx.Err() == nil; k++ {
		key := fmt.Sprintf("sim.intruder.%d.%d", res.Index, k)
		c.rec.expect(key)
		keys = append(keys, key)
		bctx, cancel := context.WithTimeout(ctx, ip.Timeout.D())
		_, err := in.nd.Gossip().Broadcast(bctx, protocol.EventPayload{EventType: key, Detail: "intruder"})
		cancel()
		if err != nil {
			unsent++
			c.log.Debug("the intruder's broadcast did not leave it", "err", err.Error())
		}
	}
	ctl := c.control(ctx, res, ip, up)

	// Its heartbeats had their chance (observe) after it had a gossip peer.
	if rest := ip.Observe.D() - time.Since(started); rest > 0 && c.gossipOn() {
		sleepCtx(ctx, rest)
	}
	acted, heard := 0, 0
	for _, id := range ids {
		acted += min(1, c.rec.deliveries(id))
	}
	for _, key := range keys {
		heard += len(c.rec.receipts(key, true))
	}
	knownBy := 0
	if c.gossipOn() {
		for _, j := range up {
			if nd := c.node(j); nd != nil && nd.Gossip() != nil {
				if a, ok := nd.Gossip().Agent(in.agentID); ok && a.PeerID == in.nd.ID() {
					knownBy++
				}
			}
		}
	}
	res.Metrics["intruder_sent"] = float64(sent)
	res.Metrics["intruder_broadcasts"] = float64(len(keys))
	res.Metrics["broadcasts_unsent"] = float64(unsent)
	res.Metrics["refused"] = float64(refused)
	res.Metrics["refused_ratio"] = ratio(refused, sent)
	res.Metrics["named_ratio"] = ratio(named, refused)
	res.Metrics["acted_on"] = float64(acted + heard)
	res.Metrics["broadcasts_heard"] = float64(heard)
	res.Metrics["bound_to_intruder"] = float64(knownBy)
	for rule, n := range rules {
		res.Metrics["rule_"+rule] = ratio(n, refused)
	}
	res.Metrics["control_acted_ratio"] = ctl
	return ctx.Err()
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
	if ip.Broadcasts > 0 && nd.Gossip() != nil {
		for _, j := range up {
			if j != from {
				want[j] = true
			}
		}
		c.rec.expect(key)
		bctx, cancel := context.WithTimeout(ctx, ip.Timeout.D())
		if _, err := nd.Gossip().Broadcast(bctx, protocol.EventPayload{EventType: key, Detail: "control"}); err == nil {
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

// startIntruder starts the intruder of step `step`: a node with a key of its own, no
// discovery (it is told where the agents are), gossip on, durable delivery off (each send is
// one attempt whose refusal comes back at once). What it holds:
//
//   - none: it runs in open mode, with no certificate to show;
//   - expired: a certificate of the mesh for its agent id that expired expiredAgo ago. It
//     stands for a node that kept running after its certificate expired (its renewals
//     failed) without waiting for expiry plus the 30 s of skew that verifiers allow: its
//     clock runs expiredClockLag behind (within that skew, so its messages and the answers
//     it gets are on time), by which its own start check, which also allows 30 s, still
//     passes; every other node sees the certificate expired;
//   - revoked: the certificate it gets by redeeming an invitation from node 0, on the host
//     it will run on; runIntruder has it revoked once the intruder is connected.
func (c *cluster) startIntruder(step int, ip *intruderParams) (*intruder, error) {
	sk, _, err := crypto.GenerateEd25519Key(seededReader{c.rng})
	if err != nil {
		return nil, err
	}
	pid, _ := peer.IDFromPrivateKey(sk)
	in := &intruder{idx: len(c.slots) + step, agentID: fmt.Sprintf("sim:intruder:step%d", step)}
	if ip.As >= 0 {
		in.agentID = c.slots[ip.As].agentID
	}
	n := c.sc.Node
	opts := []node.Option{
		node.WithAgent(in.agentID, protocol.Manifest{Name: "sim intruder", Version: "sim"}),
		node.WithDataDir(filepath.Join(c.dir, fmt.Sprintf("intruder-%d", step))),
		node.WithLogger(c.log.With("node", "intruder", "step", step)),
		node.WithHeartbeatInterval(n.HeartbeatInterval.D()),
		node.WithRateLimit(n.RatePerSecond, int(2*n.RatePerSecond)),
		node.WithDiscovery(false),
		node.WithGossip(c.gossipOn(), pubsub.WithSuspectAfter(n.SuspectAfter)),
		node.WithDurable(false),
		node.WithAudit(false, false),
	}
	var inv *authority.Invite
	switch ip.Certificate {
	case CertRevoked:
		if inv, err = c.invite("the intruder", in.agentID); err != nil {
			return nil, err
		}
	case CertNone:
		opts = append(opts, node.WithTrust(node.TrustOpen))
	case CertExpired:
		issued := func() time.Time { return time.Now().Add(-expiredAgo - time.Second) }
		past, err := authority.New(c.authKey, authority.WithClock(issued))
		if err != nil {
			return nil, err
		}
		cert, err := past.Issue(authority.CertRequest{AgentID: in.agentID, Peer: pid, TTL: time.Second})
		if err != nil {
			return nil, err
		}
		opts = append(opts, node.WithAuthority(c.auth.ID(), cert.Raw),
			node.WithClock(func() time.Time { return time.Now().Add(-expiredClockLag) }))
	}
	if c.net != nil {
		h, err := c.net.addPeer(in.idx, sk)
		if err != nil {
			return nil, err
		}
		sh, err := newSimHost(h, n.ConnLow, n.ConnHigh, n.ConnGrace.D())
		if err != nil {
			_ = h.Close()
			c.net.forget(in.idx)
			return nil, err
		}
		for _, j := range c.up() {
			if err := c.net.link(in.idx, j, pid, c.slots[j].pid); err != nil {
				_ = sh.Close()
				c.net.isolate(in.idx)
				c.net.forget(in.idx)
				return nil, err
			}
		}
		if inv != nil {
			if in.cert, err = redeem("the intruder", sh, *inv, in.agentID, nil); err != nil {
				_ = sh.Close()
				c.net.isolate(in.idx)
				c.net.forget(in.idx)
				return nil, err
			}
		}
		opts = append(opts, node.WithHost(sh, sk))
	} else {
		if inv != nil {
			if in.cert, err = redeemLoopback("the intruder", sk, *inv, in.agentID, nil); err != nil {
				return nil, err
			}
		}
		opts = append(opts, node.WithKey(sk), node.WithListen("/ip4/127.0.0.1/tcp/0"), node.WithNAT(false))
	}
	if in.cert != nil {
		opts = append(opts, node.WithAuthority(c.auth.ID(), in.cert.Raw))
	}
	if in.nd, err = node.New(opts...); err != nil {
		if c.net != nil {
			c.net.isolate(in.idx)
			c.net.forget(in.idx)
		}
		return nil, fmt.Errorf("intruder: %w", err)
	}
	return in, nil
}

// introduce tells the intruder where every running agent is and connects it to each, then
// waits until its gossip has a peer on the broadcast topic (else its broadcasts would reach
// nobody, and prove nothing).
func (c *cluster) introduce(ctx context.Context, in *intruder, up []int, timeout time.Duration) error {
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, j := range up {
		nd := c.node(j)
		if nd == nil {
			continue
		}
		ai := peer.AddrInfo{ID: nd.ID(), Addrs: nd.Host().Addrs()}
		in.nd.AddPeer(c.slots[j].agentID, ai)
		if err := in.nd.Host().Connect(ictx, ai); err != nil {
			return fmt.Errorf("intruder: connecting to node %d: %w", j, err)
		}
	}
	g := in.nd.Gossip()
	if g == nil {
		return nil
	}
	if !waitFor(ictx, func() bool { return len(g.PubSub().ListPeers(broadcastTopic)) > 0 }) {
		return fmt.Errorf("intruder: no gossip peer on %s within %s: its broadcasts would reach nobody", broadcastTopic, timeout)
	}
	return nil
}

// revoke has node 0 revoke the intruder's certificate, by its id (an intruder that claims a
// slot's agent id must not take that slot's own certificate with it), and waits until every
// running node applies the new list: revocation_applied_ms.
func (c *cluster) revoke(ctx context.Context, in *intruder, up []int, timeout time.Duration, res *StepResult) error {
	authNode := c.node(0)
	if authNode == nil {
		return fmt.Errorf("intruder: node 0, the mesh authority's node, is not running to revoke its certificate")
	}
	t0 := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := authNode.Revoke(rctx, in.cert.ID); err != nil {
		return fmt.Errorf("intruder: revoking its certificate: %w", err)
	}
	seq := authNode.RevocationSeq()
	applied := func() bool {
		for _, j := range up {
			if nd := c.node(j); nd != nil && nd.RevocationSeq() < seq {
				return false
			}
		}
		return true
	}
	if !waitFor(rctx, applied) {
		return fmt.Errorf("intruder: not every node applied revocation list %d within %s", seq, timeout)
	}
	res.Metrics["revocation_applied_ms"] = ms(time.Since(t0))
	return nil
}

// stopIntruder closes the intruder's node and takes it off the mocknet.
func (c *cluster) stopIntruder(in *intruder) {
	if err := in.nd.Close(); err != nil {
		c.log.Debug("closing the intruder", "err", err.Error())
	}
	if c.net != nil {
		c.net.isolate(in.idx)
		c.net.forget(in.idx)
	}
}

var broadcastTopic = pubsub.DefaultTopicPrefix + "broadcast"

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
