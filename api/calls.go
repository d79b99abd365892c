package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/workflow"
)

// The calls whose documents are the node's own Go types (trust, certificates, tokens,
// conversations, events, coordination, workflows, approvals), made with an apiclient.Client.
// The other calls are the client's own methods.

// postJSON marshals in as JSON, posts it to path and decodes the answer into out.
func postJSON(ctx context.Context, c *apiclient.Client, path string, in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPost, path, raw, mediaJSON, out)
}

// Trust returns who may speak for which agent id on the node, and the recent conflicts.
func Trust(ctx context.Context, c *apiclient.Client) (TrustDoc, error) {
	var d TrustDoc
	return d, c.Do(ctx, http.MethodGet, "/v1/trust", nil, "", &d)
}

// ForgetTrust forgets the pin of agentID, or every pin of peerID when agentID is "".
func ForgetTrust(ctx context.Context, c *apiclient.Client, agentID, peerID string) (ForgetResult, error) {
	var d ForgetResult
	return d, postJSON(ctx, c, "/v1/trust/forget", ForgetRequest{AgentID: agentID, PeerID: peerID}, &d)
}

// Invite asks the mesh authority's node for a one-time invitation on the terms of req (an
// agent id, "" for any id no other peer holds; a ttl, "" for the node's default; grants;
// replace).
func Invite(ctx context.Context, c *apiclient.Client, req InviteRequest) (InviteDoc, error) {
	var d InviteDoc
	return d, postJSON(ctx, c, "/v1/trust/invites", req, &d)
}

// Revoke asks the mesh authority's node to revoke what req names, an agent id or a
// certificate id, and returns the certificates revoked (with req.DryRun, those it would).
func Revoke(ctx context.Context, c *apiclient.Client, req RevokeRequest) (CertificatesDoc, error) {
	var d CertificatesDoc
	return d, postJSON(ctx, c, "/v1/trust/revoke", req, &d)
}

// Certificates lists the certificates the mesh authority issued (its node only).
func Certificates(ctx context.Context, c *apiclient.Client) (CertificatesDoc, error) {
	var d CertificatesDoc
	return d, c.Do(ctx, http.MethodGet, "/v1/trust/certificates", nil, "", &d)
}

// AuthToken obtains an A2ACP token for the node's agent from the mesh authority.
func AuthToken(ctx context.Context, c *apiclient.Client, req TokenRequest) (TokenDoc, error) {
	var d TokenDoc
	return d, postJSON(ctx, c, AuthTokenPath, req, &d)
}

// Conversation lists conversation id from the node's audit log, the entries after audit seq
// after, at most limit (0: the server's default, 1000). Ask again with after = NextAfter to
// follow on.
func Conversation(ctx context.Context, c *apiclient.Client, id string, after uint64, limit int) (ConversationDoc, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var d ConversationDoc
	return d, c.Do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(id)+"?"+q.Encode(), nil, "", &d)
}

// Events follows the event stream until ctx ends or fn returns an error (returned as is).
func Events(ctx context.Context, c *apiclient.Client, f EventFilter, fn func(EventItem) error) error {
	q := url.Values{}
	if len(f.Kinds) > 0 {
		q.Set("kinds", strings.Join(f.Kinds, ","))
	}
	if f.AgentID != "" {
		q.Set("agent", f.AgentID)
	}
	if f.Group != "" {
		q.Set("group", f.Group)
	}
	resp, err := c.Open(ctx, http.MethodGet, "/v1/events?"+q.Encode(), nil, "", "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return apiclient.DecodeError(resp.StatusCode, raw)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 2<<20) // one gossip message is at most 1 MiB
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var it EventItem
		if err := json.Unmarshal([]byte(data), &it); err != nil {
			return fmt.Errorf("event stream: %w", err)
		}
		if err := fn(it); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// coordCall posts a coordination request to path with ?wait=wait (0: the server's maximum).
func coordCall(ctx context.Context, c *apiclient.Client, path string, body any, wait time.Duration, out any) error {
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	return postJSON(ctx, c, path, body, out)
}

// CoordAny asks an agent with q.Capability (POST /v1/coord/any); a failure of every candidate
// is an *apiclient.APIError whose detail lists them.
func CoordAny(ctx context.Context, c *apiclient.Client, q CoordRequest, wait time.Duration) (ResultDoc, error) {
	var d ResultDoc
	return d, coordCall(ctx, c, "/v1/coord/any", q, wait, &d)
}

// CoordFallback asks q.Agents in order, or q.Capability's providers, until one answers
// (POST /v1/coord/fallback).
func CoordFallback(ctx context.Context, c *apiclient.Client, q CoordRequest, wait time.Duration) (ResultDoc, error) {
	var d ResultDoc
	return d, coordCall(ctx, c, "/v1/coord/fallback", q, wait, &d)
}

// CoordScatter scatters q and returns the aggregate (POST /v1/coord/scatter); a rule not met
// is in the doc's Met and Error, not an error.
func CoordScatter(ctx context.Context, c *apiclient.Client, q CoordRequest, wait time.Duration) (GatherDoc, error) {
	var d GatherDoc
	return d, coordCall(ctx, c, "/v1/coord/scatter", q, wait, &d)
}

// CoordPipeline runs a pipeline (POST /v1/coord/pipeline); a failed step is in the doc's
// Error, not an error.
func CoordPipeline(ctx context.Context, c *apiclient.Client, q PipelineRequest, wait time.Duration) (PipelineDoc, error) {
	var d PipelineDoc
	return d, coordCall(ctx, c, "/v1/coord/pipeline", q, wait, &d)
}

// StartWorkflow starts the workflow a YAML or JSON declaration describes (POST
// /v1/workflows); with wait > 0 it answers once the workflow ended or wait passed, with its
// state so far.
func StartWorkflow(ctx context.Context, c *apiclient.Client, decl []byte, wait time.Duration) (workflow.State, error) {
	path := "/v1/workflows"
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	ctype := mediaYAML
	if t := bytes.TrimSpace(decl); len(t) > 0 && t[0] == '{' {
		ctype = mediaJSON
	}
	var st workflow.State
	return st, c.Do(ctx, http.MethodPost, path, decl, ctype, &st)
}

// Workflow returns a workflow's state (GET /v1/workflows/{id}).
func Workflow(ctx context.Context, c *apiclient.Client, id string) (workflow.State, error) {
	var st workflow.State
	return st, c.Do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(id), nil, "", &st)
}

// Workflows lists the node's workflows, the latest started first (GET /v1/workflows).
func Workflows(ctx context.Context, c *apiclient.Client) ([]workflow.State, error) {
	var l WorkflowList
	return l.Workflows, c.Do(ctx, http.MethodGet, "/v1/workflows", nil, "", &l)
}

// CancelWorkflow stops a running workflow and returns its final state (POST
// /v1/workflows/{id}/cancel).
func CancelWorkflow(ctx context.Context, c *apiclient.Client, id string) (workflow.State, error) {
	var st workflow.State
	return st, c.Do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(id)+"/cancel", nil, "", &st)
}

// Approvals lists the messages held for approval.
func Approvals(ctx context.Context, c *apiclient.Client) (ApprovalsDoc, error) {
	var d ApprovalsDoc
	return d, c.Do(ctx, http.MethodGet, "/v1/approvals", nil, "", &d)
}

// Approve approves the held message id on behalf of by (empty: DefaultApprovalBy).
func Approve(ctx context.Context, c *apiclient.Client, id, by string) (DecisionResult, error) {
	return decide(ctx, c, id, "approve", DecisionRequest{By: by})
}

// Reject rejects the held message id on behalf of by, for reason.
func Reject(ctx context.Context, c *apiclient.Client, id, by, reason string) (DecisionResult, error) {
	return decide(ctx, c, id, "reject", DecisionRequest{By: by, Reason: reason})
}

func decide(ctx context.Context, c *apiclient.Client, id, what string, req DecisionRequest) (DecisionResult, error) {
	var d DecisionResult
	return d, postJSON(ctx, c, "/v1/approvals/"+url.PathEscape(id)+"/"+what, req, &d)
}
