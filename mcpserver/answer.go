package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iacp-node/iacp-node/apiclient"
)

// inputError is a tool input the server refuses before it reaches the node.
type inputError struct{ text string }

func (e *inputError) Error() string { return e.text }

// invalid is the PAYLOAD_INVALID error of a bad input; text says what is wrong and what to
// do.
func invalid(text string) error {
	return &inputError{text: apiclient.CodePayloadInvalid + ": " + text}
}

// errorText is an error as a tool tells it, in one style: "CODE: what happened; what to
// do". The node's errors are in it already; no node answering is INTERNAL_ERROR, and says
// how to start one.
func errorText(err error) string {
	var (
		ae *apiclient.APIError
		ie *inputError
		nn *apiclient.NoNodeError
	)
	switch {
	case errors.As(err, &ae):
		return ae.Error()
	case errors.As(err, &ie):
		return ie.text
	case errors.As(err, &nn):
		where := "at " + nn.Addr
		if nn.DataDir != "" {
			where = "with data dir " + nn.DataDir
		}
		return fmt.Sprintf("%s: no iacp-node is running %s (not started yet, or stopped); start it (iacp-node run), then call again",
			apiclient.CodeInternalError, where)
	}
	return apiclient.CodeInternalError + ": " + err.Error() + "; check that the node runs (iacp-node status), then call again"
}

// failure is a tool's result for err: a tool error whose text names the code, which the model
// reads and may act on.
func failure(err error) (*mcp.CallToolResult, Output, error) {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: errorText(err)}}}, nil, nil
}

// answer is a tool's result: the node's document as structured content (the SDK also puts
// it, as JSON text, in the content).
func answer(v any) (*mcp.CallToolResult, Output, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return failure(err)
	}
	var out Output
	if err := json.Unmarshal(raw, &out); err != nil {
		return failure(err)
	}
	return nil, out, nil
}

// resource is a resource's contents: the node's document as JSON.
func resource(uri string, v any, err error) (*mcp.ReadResourceResult, error) {
	if err != nil {
		return nil, errors.New(errorText(err))
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(raw)}}}, nil
}
