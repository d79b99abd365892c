package a2abridge

import (
	"context"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

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

// Execute sends the message to the target agent and emits the task's events: submitted (a
// new task), working, then per answer a working update (a pending response), and last the
// task completed with the answer as its artifact (accepted), or a final status: rejected
// (rejected), input-required (counter) or failed (an error). A canceled task (tasks/cancel,
// CancelTask) ends the request's wait, and a request still queued then is never delivered
// (the local API cancels it with its caller).
func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s := e.s
		if !s.track() {
			yield(failed(ec, protocol.Errorf(protocol.CodeTimeout, "%v", errClosed)), nil)
			return
		}
		defer s.calls.Done()
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		target, _ := ctx.Value(targetKey{}).(string)
		m, err := requestOf(target, ec, s.o.Wait)
		if err != nil {
			yield(failed(ec, err), nil)
			return
		}
		call, cancel := context.WithTimeout(ctx, s.o.Wait)
		defer cancel()
		defer context.AfterFunc(s.ctx, cancel)()
		resp, err := s.request(call, m, s.o.Wait)
		for err == nil {
			status, serr := protocol.StatusOf(resp)
			if serr != nil {
				yield(failed(ec, serr), nil)
				return
			}
			if status != protocol.ResponsePending {
				yield(finish(ec, status, resp), nil)
				return
			}
			if !yield(statusEvent(ec, a2a.TaskStateWorking, resp), nil) {
				return
			}
			resp, err = s.next(call, resp.Envelope.CorrelationID, resp.Envelope.Sender.AgentID)
		}
		if call.Err() != nil && s.ctx.Err() == nil && ctx.Err() == nil {
			err = protocol.Errorf(protocol.CodeTimeout, "no final answer from %s within %s", target, s.o.Wait)
		}
		yield(failed(ec, err), nil)
	}
}

// Cancel cancels the task on the A2A side; its execution's end ends the IACP request's wait.
func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// requestOf is the IACP request an A2A message becomes: its parts as the payload, its ids
// under "a2a", the intent from its metadata (IntentKey), and a TTL of the bridge's wait.
func requestOf(target string, ec *a2asrv.ExecutorContext, wait time.Duration) (*protocol.Message, error) {
	payload := PayloadOf(ec.Message.Parts)
	payload[PayloadKey] = map[string]any{"message_id": ec.Message.ID, "context_id": ec.ContextID, "task_id": string(ec.TaskID)}
	raw, err := encode(payload)
	if err != nil {
		return nil, err
	}
	m := &protocol.Message{}
	m.Envelope.Recipient.AgentID = target
	m.Envelope.TTLSeconds = int64(math.Ceil(wait.Seconds()))
	m.Message.Type = protocol.TypeRequest
	m.Message.Intent = protocol.IntentHandoff
	if in, ok := ec.Message.Metadata[IntentKey].(string); ok && in != "" {
		m.Message.Intent = protocol.Intent(in)
	}
	m.Message.Payload = raw
	return m, nil
}

// finish is the task's last event for a final response: one Task, completed with the
// response as its artifact, rather than an artifact update and a status update (each event
// the SDK applies copies the task); or the final status of a rejection or a counter-offer.
func finish(ec *a2asrv.ExecutorContext, status string, resp *protocol.Message) a2a.Event {
	switch status {
	case protocol.ResponseRejected:
		return statusEvent(ec, a2a.TaskStateRejected, resp)
	case protocol.ResponseCounter:
		return statusEvent(ec, a2a.TaskStateInputRequired, resp)
	}
	payload, err := decode(resp)
	if err != nil {
		return failed(ec, err)
	}
	art := &a2a.Artifact{ID: a2a.NewArtifactID(), Name: "response", Parts: PartsOf(payload, true),
		Metadata: map[string]any{"iacp_message_id": resp.Envelope.MessageID, "from": resp.Envelope.Sender.AgentID}}
	history := []*a2a.Message{ec.Message}
	if ec.StoredTask != nil {
		history = append(slices.Clone(ec.StoredTask.History), ec.Message)
	}
	now := time.Now()
	return &a2a.Task{ID: ec.TaskID, ContextID: ec.ContextID, History: history, Artifacts: []*a2a.Artifact{art},
		Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &now}}
}

// statusEvent is a status update whose message carries the response's payload.
func statusEvent(ec *a2asrv.ExecutorContext, state a2a.TaskState, resp *protocol.Message) *a2a.TaskStatusUpdateEvent {
	var msg *a2a.Message
	if payload, err := decode(resp); err == nil {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, PartsOf(payload, true)...)
	}
	return a2a.NewStatusUpdateEvent(ec, state, msg)
}

// failed ends the task failed, its status message naming the IACP code.
func failed(ec *a2asrv.ExecutorContext, err error) *a2a.TaskStatusUpdateEvent {
	return a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, errorParts(err)...))
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
