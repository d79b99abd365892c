package api

import (
	"net/http"

	"github.com/iacp-node/iacp-node/protocol"
)

// StatusOf maps an IACP error code to the HTTP status the API answers with. The table is
// documented in docs/api.md ("Errors"); every registered code is in it.
//
// AGENT_NOT_FOUND is 404: the agent named in recipient.agent_id is the resource the call is
// about, and it is unknown or unreachable; the node itself is fine (a 502 would blame it).
func StatusOf(c protocol.Code) int {
	switch c {
	case protocol.CodePayloadInvalid, protocol.CodeChannelUnknown, protocol.CodeVersionUnsupported:
		return http.StatusBadRequest // 400: fix the document
	case protocol.CodeIdentityInvalid:
		return http.StatusUnauthorized // 401: bad token, or a signature that does not verify
	case protocol.CodePermissionDenied:
		return http.StatusForbidden // 403: policy forbids this intent
	case protocol.CodeAgentNotFound:
		return http.StatusNotFound // 404: no such agent reachable
	case protocol.CodeDuplicate:
		return http.StatusConflict // 409: this message_id was already sent
	case protocol.CodeCapabilityMismatch:
		return http.StatusUnprocessableEntity // 422: the recipient cannot do this intent
	case protocol.CodeRateLimited:
		return http.StatusTooManyRequests // 429 with Retry-After
	case protocol.CodeTimeout:
		return http.StatusGatewayTimeout // 504: no response in time
	default:
		return http.StatusInternalServerError // 500: INTERNAL_ERROR and unknown codes
	}
}
