package a2abridge

import (
	"context"
	"encoding/json"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

// The bridge's calls to the node's local API, in the node's own types: the client speaks the
// API's wire documents (apiclient), the bridge maps IACP messages and manifests (protocol).

// request sends the IACP request m through the API and waits up to wait for its answer.
func (s *Server) request(ctx context.Context, m *protocol.Message, wait time.Duration) (*protocol.Message, error) {
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return nil, err
	}
	am, err := apiclient.ParseMessage(raw)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.Request(ctx, am, wait)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeJSON(resp.Raw)
}

// manifestOf is a manifest from the API as the node's type.
func manifestOf(m apiclient.Manifest) protocol.Manifest {
	var out protocol.Manifest
	raw, _ := json.Marshal(m)
	_ = json.Unmarshal(raw, &out)
	return out
}
