package api

import (
	"context"
	"net/http"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/workflow"
)

// WorkflowList is GET /v1/workflows: every workflow the node coordinates or coordinated, the
// latest started first.
type WorkflowList struct {
	Workflows []workflow.State `json:"workflows"`
}

// startWorkflows takes WithWorkflows' engine, or builds the node's own (which resumes the
// workflows its store left running); a node without a store has none, and the routes say so.
func (s *Server) startWorkflows() error {
	if s.flows = s.cfg.flows; s.flows != nil {
		return nil
	}
	e, err := workflow.New(s.n)
	if protocol.CodeOf(err) == protocol.CodeCapabilityMismatch {
		s.flowsErr = err
		return nil
	}
	if err != nil {
		return err
	}
	s.flows, s.ownFlows = e, true
	return nil
}

// workflows returns the server's workflow engine, or answers why there is none.
func (s *Server) workflows(w http.ResponseWriter, r *http.Request) (*workflow.Engine, bool) {
	if s.flows == nil {
		s.fail(w, r, s.flowsErr, "")
		return nil, false
	}
	return s.flows, true
}

// postWorkflow starts a workflow from its declaration (YAML or JSON, docs/coordination.md);
// ?wait=D answers once it ended (or D passed: 202 with its state so far).
func (s *Server) postWorkflow(w http.ResponseWriter, r *http.Request) {
	e, ok := s.workflows(w, r)
	if !ok {
		return
	}
	wait, waiting, body, ok := s.readCall(w, r)
	if !ok {
		return
	}
	spec, err := workflow.Parse(body)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	st, err := e.Start(spec)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if !waiting {
		write(w, r, http.StatusAccepted, st)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	st, err = e.Wait(ctx, spec.ID)
	if protocol.CodeOf(err) == protocol.CodeTimeout {
		write(w, r, http.StatusAccepted, st)
		return
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, st)
}

func (s *Server) getWorkflows(w http.ResponseWriter, r *http.Request) {
	if e, ok := s.workflows(w, r); ok {
		write(w, r, http.StatusOK, WorkflowList{Workflows: e.List()})
	}
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	e, ok := s.workflows(w, r)
	if !ok {
		return
	}
	st, err := e.Status(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, st)
}

func (s *Server) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	e, ok := s.workflows(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.maxWait)
	defer cancel()
	st, err := e.Cancel(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, st)
}
