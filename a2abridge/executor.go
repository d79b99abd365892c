package a2abridge

import (
	"context"
	"math"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/iacp-node/iacp-node/protocol"
)

// IntentKey is the A2A message metadata key that names the IACP intent of the request a
// message becomes (handoff, negotiate, query, or an x- custom intent). Default handoff.
const IntentKey = "iacp_intent"

// followPoll bounds one inbox long-poll while the bridge waits for the answer after a pending
// one, so that the wait's end is noticed.
const followPoll = 5 * time.Second

// executor turns an A2A message into an IACP request through the node's API, and the answers
// into the task's events.
type executor struct{ s *Server }

var _ a2asrv.AgentExecutor = (*executor)(nil)

// Execute sends the message to the target agent and writes the task's events: working, then
// per answer a working update (a pending response), and last the task completed with the
// answer as its artifact (accepted), or a final status update: rejected (rejected),
// input-required (counter) or failed (an error).
func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	s := e.s
	if !s.track() {
		return fail(ctx, rc, q, protocol.Errorf(protocol.CodeTimeout, "%v", errClosed))
	}
	defer s.calls.Done()
	// The task starts submitted (the SDK made it so): working is its first event.
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	target, _ := ctx.Value(targetKey{}).(string)
	m, err := requestOf(target, rc, s.o.Wait)
	if err != nil {
		return fail(ctx, rc, q, err)
	}
	call, cancel := context.WithTimeout(ctx, s.o.Wait)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	resp, err := s.request(call, m, s.o.Wait)
	for err == nil {
		status, serr := protocol.StatusOf(resp)
		if serr != nil {
			return fail(ctx, rc, q, serr)
		}
		if status != protocol.ResponsePending {
			return finish(ctx, rc, q, status, resp)
		}
		if err := q.Write(ctx, statusEvent(rc, a2a.TaskStateWorking, resp, false)); err != nil {
			return err
		}
		resp, err = s.next(call, resp.Envelope.CorrelationID, resp.Envelope.Sender.AgentID)
	}
	if call.Err() != nil && s.ctx.Err() == nil {
		err = protocol.Errorf(protocol.CodeTimeout, "no final answer from %s within %s", target, s.o.Wait)
	}
	return fail(ctx, rc, q, err)
}

// Cancel cancels the task on the A2A side; the IACP request already sent is not recalled (IACP
// has no cancel), and its answer, when it comes, is dropped.
func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// requestOf is the IACP request an A2A message becomes: its parts as the payload, its ids
// under "a2a", the intent from its metadata (IntentKey), and a TTL of the bridge's wait.
func requestOf(target string, rc *a2asrv.RequestContext, wait time.Duration) (*protocol.Message, error) {
	payload := PayloadOf(rc.Message.Parts)
	payload[PayloadKey] = map[string]any{"message_id": rc.Message.ID, "context_id": rc.ContextID, "task_id": string(rc.TaskID)}
	raw, err := encode(payload)
	if err != nil {
		return nil, err
	}
	m := &protocol.Message{}
	m.Envelope.Recipient.AgentID = target
	m.Envelope.TTLSeconds = int64(math.Ceil(wait.Seconds()))
	m.Message.Type = protocol.TypeRequest
	m.Message.Intent = protocol.IntentHandoff
	if in, ok := rc.Message.Metadata[IntentKey].(string); ok && in != "" {
		m.Message.Intent = protocol.Intent(in)
	}
	m.Message.Payload = raw
	return m, nil
}

// finish writes the task's last events for a final response.
func finish(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, status string, resp *protocol.Message) error {
	switch status {
	case protocol.ResponseRejected:
		return q.Write(ctx, statusEvent(rc, a2a.TaskStateRejected, resp, true))
	case protocol.ResponseCounter:
		return q.Write(ctx, statusEvent(rc, a2a.TaskStateInputRequired, resp, true))
	}
	payload, err := decode(resp)
	if err != nil {
		return fail(ctx, rc, q, err)
	}
	art := &a2a.Artifact{ID: a2a.NewArtifactID(), Name: "response", Parts: PartsOf(payload, true),
		Metadata: map[string]any{"iacp_message_id": resp.Envelope.MessageID, "from": resp.Envelope.Sender.AgentID}}
	// One Task event, not an artifact update and a status update: the SDK deep-copies the
	// task (through gob) for each event it applies, the largest cost of a call (bench_test.go).
	history := []*a2a.Message{rc.Message}
	if rc.StoredTask != nil {
		history = rc.StoredTask.History
	}
	now := time.Now()
	return q.Write(ctx, &a2a.Task{ID: rc.TaskID, ContextID: rc.ContextID, History: history, Artifacts: []*a2a.Artifact{art},
		Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &now}})
}

// statusEvent is a status update whose message carries the response's payload.
func statusEvent(rc *a2asrv.RequestContext, state a2a.TaskState, resp *protocol.Message, final bool) *a2a.TaskStatusUpdateEvent {
	var msg *a2a.Message
	if payload, err := decode(resp); err == nil {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, PartsOf(payload, true)...)
	}
	ev := a2a.NewStatusUpdateEvent(rc, state, msg)
	ev.Final = final
	return ev
}

// fail ends the task failed, its status message naming the IACP code.
func fail(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, err error) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, errorParts(err)...))
	ev.Final = true
	return q.Write(ctx, ev)
}

// next waits for the next answer from agent from to the request reqID after a pending one: it
// comes to the node's inbox, correlated to the request, and is taken from there (other
// messages, an answer from anyone else among them, are left for the agent).
func (s *Server) next(ctx context.Context, reqID, from string) (*protocol.Message, error) {
	var after uint64
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := followPoll
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		page, err := s.c.Inbox(ctx, after, max(wait, time.Millisecond))
		if err != nil {
			return nil, err
		}
		for _, it := range page.Messages {
			if it.Message == nil {
				continue
			}
			m, err := protocol.DecodeJSON(it.Message.Raw)
			if err != nil || m.Envelope.CorrelationID != reqID || m.Envelope.Sender.AgentID != from ||
				(m.Message.Type != protocol.TypeResponse && m.Message.Type != protocol.TypeError) {
				continue
			}
			if err := s.c.Ack(ctx, it.MessageID); err != nil {
				return nil, err
			}
			if m.Message.Type == protocol.TypeError {
				perr, err := protocol.ErrorOf(m)
				if err != nil {
					return nil, err
				}
				return nil, perr
			}
			return m, nil
		}
		after = page.NextAfter
	}
}
