package a2abridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// The JSON-RPC methods of each A2A version the bridge speaks, at one endpoint: A2A 1.0's are
// named like SendMessage, 0.3's like message/send, so a call's method says its version.
var (
	methods10 = []string{"SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
		"GetTaskPushNotificationConfig", "CreateTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
		"DeleteTaskPushNotificationConfig", "GetExtendedAgentCard"}
	methods03 = []string{"message/send", "message/stream", "tasks/get", "tasks/cancel", "tasks/resubscribe",
		"tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/list",
		"tasks/pushNotificationConfig/delete", "agent/getAuthenticatedExtendedCard"}
)

// JSON-RPC error codes the bridge answers itself.
const (
	rpcMethodNotFound      = -32601
	rpcVersionNotSupported = -32009 // A2A 1.0's VersionNotSupportedError
)

// serveRPC reads a JSON-RPC call (bounded by MaxCallBytes) and hands it to the SDK's handler
// of its A2A version, by its method name and its A2A-Version header: 1.0 (the default for a
// 1.0 method) or 0.3. A version the bridge does not speak is a VersionNotSupported error, an
// unknown method a method-not-found error that lists the methods of both versions.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read the call: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var call struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &call) != nil {
		s.rpc.ServeHTTP(w, r) // the SDK answers the parse error
		return
	}
	version := strings.TrimSpace(r.Header.Get(a2a.SvcParamVersion))
	switch {
	case slices.Contains(methods10, call.Method) && (version == "" || version == "1.0" || version == "1"):
		s.rpc.ServeHTTP(w, r)
	case slices.Contains(methods03, call.Method) && (version == "" || version == string(a2av0.Version) || version == "0.3.0"):
		s.rpc0.ServeHTTP(w, r)
	case version != "" && version != "1.0" && version != "1" && version != string(a2av0.Version) && version != "0.3.0":
		rpcError(w, call.ID, rpcVersionNotSupported, fmt.Sprintf(
			"A2A version %q is not supported: this endpoint speaks A2A 1.0 (A2A-Version: 1.0; SendMessage, ...) and 0.3 (message/send, ...)", version))
	case slices.Contains(methods10, call.Method) || slices.Contains(methods03, call.Method):
		rpcError(w, call.ID, rpcVersionNotSupported, fmt.Sprintf(
			"method %s is not an A2A %s method: A2A 1.0 names it like SendMessage, 0.3 like message/send; send the A2A-Version header of the method's version", call.Method, version))
	default:
		rpcError(w, call.ID, rpcMethodNotFound, fmt.Sprintf(
			"method %q is neither an A2A 1.0 method (%s) nor an A2A 0.3 one (%s)", call.Method, strings.Join(methods10[:5], ", "), strings.Join(methods03[:4], ", ")))
	}
}

// rpcError answers a JSON-RPC error.
func rpcError(w http.ResponseWriter, id any, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}
