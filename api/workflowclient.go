package api

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/iacp-node/iacp-node/workflow"
)

// StartWorkflow starts the workflow a YAML or JSON declaration describes (POST
// /v1/workflows); with wait > 0 it answers once the workflow ended or wait passed, with its
// state so far.
func (c *Client) StartWorkflow(ctx context.Context, decl []byte, wait time.Duration) (workflow.State, error) {
	path := "/v1/workflows"
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	ctype := mediaYAML
	if t := bytes.TrimSpace(decl); len(t) > 0 && t[0] == '{' {
		ctype = mediaJSON
	}
	var st workflow.State
	return st, c.do(ctx, http.MethodPost, path, decl, ctype, &st)
}

// Workflow returns a workflow's state (GET /v1/workflows/{id}).
func (c *Client) Workflow(ctx context.Context, id string) (workflow.State, error) {
	var st workflow.State
	return st, c.do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(id), nil, "", &st)
}

// Workflows lists the node's workflows, the latest started first (GET /v1/workflows).
func (c *Client) Workflows(ctx context.Context) ([]workflow.State, error) {
	var l WorkflowList
	return l.Workflows, c.do(ctx, http.MethodGet, "/v1/workflows", nil, "", &l)
}

// CancelWorkflow stops a running workflow and returns its final state (POST
// /v1/workflows/{id}/cancel).
func (c *Client) CancelWorkflow(ctx context.Context, id string) (workflow.State, error) {
	var st workflow.State
	return st, c.do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(id)+"/cancel", nil, "", &st)
}
