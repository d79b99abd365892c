package node

import (
	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/trust"
)

// groupBuffer is the subscription buffer of the group requests on their way to the agent; a
// burst beyond it (the senders' gossip rate is 20 a second each) loses requests, counted by
// the subscription.
const groupBuffer = 256

// serveGroups joins AllGroup and has a follower hand the group requests g delivers to the
// agent (Node.groupRequest, through the request hook).
func (m *meshPart) serveGroups(g gossiper) {
	if err := g.JoinGroup(AllGroup); err != nil {
		m.log.Warn("queries to every agent will not reach this agent", "group", AllGroup, "err", err.Error())
	}
	m.follow(g, []pubsub.Kind{pubsub.KindGroup}, groupBuffer, "group requests will not reach the agent", func(it *pubsub.Item) {
		m.hooks.request(it)
	})
}

// groupRequest hands one group request (a broadcast query, Ask) to the agent like a direct
// request: a handler or the inbox (and from there the WebSocket or the webhook), whose answer
// goes directly to the asker. Group events stay on the event stream only. The request passes
// the checks of a direct message that gossip did not run (the sender's claim on its agent id,
// the policy, the authorization) and is charged to its author's message rate; one that fails
// is dropped, unanswered. One the agent cannot take (no handler, no inbox, full) is answered
// with the error. Our own queries are not handed to our agent.
func (n *Node) groupRequest(it *pubsub.Item) {
	m := it.Message
	if m == nil || m.Message.Type != protocol.TypeRequest || it.Author == n.host.ID() {
		return
	}
	now := n.now()
	if !now.Before(m.Expires()) {
		return
	}
	sender := m.Envelope.Sender.AgentID
	err := n.wire.rate.allow(it.Author, now)
	if err == nil {
		err = n.trust.Claim(n.ctx, sender, it.Author, trust.SourceMessage)
	}
	if err == nil {
		err = n.wire.policy.check(sender, m.Message.Type, m.Message.Intent)
	}
	if err == nil {
		err = n.trust.Authorize(m, it.Author)
	}
	if err != nil {
		n.log.Info("group request dropped", "id", m.Envelope.MessageID, "from", sender, "group", it.Group, "code", protocol.CodeOf(err), "err", err.Error())
		return
	}
	n.peers.bind(sender, it.Author) // as for an accepted direct message: the answer goes back to it
	r := &Request{Msg: m.Clone(), Peer: it.Author, n: n.wire, answerTTL: m.Expires().Sub(now)}
	start, _, err := n.wire.route(r)
	if err != nil {
		n.life.spawn(func() {
			if ferr := r.Fail(err); ferr != nil {
				n.log.Debug("group request: could not send the refusal", "id", m.Envelope.MessageID, "err", ferr.Error())
			}
		})
		return
	}
	n.durable.record(audit.EventReceived, r.Msg)
	start()
}

// answerOpts are the options of an answer to r: a group request's answer lives no longer
// than the request, so that a durable outbox does not retry it after the asker stopped
// collecting.
func (r *Request) answerOpts() []protocol.Option {
	if r.answerTTL <= 0 {
		return nil
	}
	return []protocol.Option{protocol.WithTTL(r.answerTTL)}
}
