// Package delivery is the durable delivery engine: it owns what happens to a direct message
// between the store and the wire. Outbound, it stores each message before the first attempt,
// claims the ids being attempted so that no message is sent twice at once, retries with
// backoff until a receipt or the TTL, and settles each attempt in the store and the audit
// log. Inbound, it stores accepted messages before their receipts, forgets them when the agent
// takes them, and offers again at start what the agent had not taken.
//
// An Engine depends only on what its Config gives it: a Store (the few methods of
// *store.Store it uses), a Deliver func (one attempt on the wire), an Audit func, a clock,
// and the node's answers to three questions (which peer serves an agent, how to tell the
// sending agent of an expiry, how to hand a stored message to the agent). It never imports
// the node, so a test drives it with a fake store and a fake wire.
//
// # A message's path, in code order
//
// Each step has one name. Steps marked (node) are the node's, the others this package's.
//
// Sender:
//
//  1. Node.Send or Node.Request (node): seal and sign the message.
//  2. Engine.Send: claim the id, Store.PreparePut (every refusal of the store but a failed
//     commit), then the first attempt at once; meanwhile writeOutbox audits "sent" and waits
//     for the attempt's outcome at most OutboxDelay (50 ms): a receipt or a refusal not to
//     retry abandons the outbox write (the recipient holds the message durably, or nobody
//     need), anything else commits it, and Send returns only once that commit has.
//  3. Node.deliver (node; Config.Deliver): waiterFor, then transmit (resolve the recipient's
//     peer, write on a session to it), then wait for the receipt.
//
// Recipient:
//
//  4. inStream.serveAll and serveOne (node): read, charge and verify each frame.
//  5. admit (node): checkSigned; a reply goes to matchReply; anything else to route, which
//     decides where it goes (handler, inbox) and reserves room there.
//  6. Node.accept (node): Engine.Accept (Store.AcceptAll, before the receipt), bind the
//     sender to its peer, audit "received"; then start hands it over, and the receipt goes back
//     (queueReceipt, flush, sendReceipt).
//  7. The handler answers (Request.Reply, answer: inline within the receipt window, else
//     Node.Send) and returns: Node.handled (node), Engine.TakenLazily (audit "acked", then
//     Store.AckLazily on an engine goroutine, riding in the store's next commit); or the
//     agent acknowledges the inbox entry: Node.taken (node), Engine.Taken (audit "acked",
//     then Store.Ack, committed before the agent is answered).
//
// Back at the sender:
//
//  8. session.serveAll and serveOne (node): matchReply hands the receipt or reply to the
//     waiter; a reply nobody waits for is routed and accepted like any inbound message, and
//     so is one that came inline to a Send that did not wait for it (lateReply).
//  9. Engine.settle: a receipt removes the entry (Store.DeliveredLazily, a lazy write that
//     rides in the store's next commit; audit "delivered"); a retryable failure reschedules
//     it with backoff (Store.Reschedule); any other refusal removes it (Store.Delivered,
//     audit "refused"). A first attempt answered before its outbox write only audits its
//     outcome (answered). Then the claim is released.
//
// Retry loop (Engine.run, one goroutine), on every tick or wake:
//
//  10. retryReturned: the agents heard alive again (AgentReturned), the recipients whose last
//     attempt failed and whose beat was heard since (AgentHeard), and the recipients served
//     by peers that came back (PeerReturned) are due at once (Store.RetryNow). All only
//     queue the recipient for the loop: their callers never wait for a store write.
//  11. expire: Store.Expired, audit "expired", Config.Expired tells the sending agent (a
//     TIMEOUT error correlated to the message, to its waiter or handed over).
//  12. retry: Store.Due, claim each id, resend (Config.Deliver with resend set), settle.
//
// At start: Engine.Pending is read before the node serves the protocol, Engine.Start starts
// the loop, and Engine.Redeliver hands the agent again what it had not taken (auditing
// "received" for a message a crash left unaudited, and forgetting one the audit log says was
// acked). Engine.Close stops the loop and waits
// for every goroutine the engine started.
//
// Engine.Cancel takes a queued message out of the outbox (audited "cancelled"): the sender
// cancelled it, or a request's caller stopped waiting. An attempt in flight then is marked
// on its claim, and settle drops the message whatever the attempt's outcome.
package delivery
