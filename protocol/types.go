package protocol

import "strings"

// Version is the protocol version this implementation writes.
const Version = "1.0"

// SupportedVersions lists the MAJOR.MINOR versions this implementation accepts; any MINOR of
// a supported MAJOR is accepted.
var SupportedVersions = []string{"1.0"}

// Type is the message type (draft section "Message Types").
type Type string

// The five message types.
const (
	TypeRequest   Type = "request"
	TypeResponse  Type = "response"
	TypeEvent     Type = "event"
	TypeError     Type = "error"
	TypeHeartbeat Type = "heartbeat"
)

// Intent says what a message is for.
type Intent string

// The standard intents. Custom intents start with "x-".
const (
	IntentHandoff   Intent = "handoff"
	IntentQuery     Intent = "query"
	IntentNegotiate Intent = "negotiate"
	IntentNotify    Intent = "notify"
	IntentHealth    Intent = "health"
)

// The standard channels (draft "IACP Channel Names" registry). Custom channels start with "x-".
const (
	ChannelHandoff      = "handoff"
	ChannelQuery        = "query"
	ChannelCoordination = "coordination"
	ChannelNotification = "notification"
	ChannelHealth       = "health"
)

// Broadcast is the recipient agent id that addresses every agent.
const Broadcast = "*"

// StandardChannels lists the five registered channels.
var StandardChannels = []string{ChannelHandoff, ChannelQuery, ChannelCoordination, ChannelNotification, ChannelHealth}

// KnownChannel reports whether ch is a standard channel or an `x-` custom one.
func KnownChannel(ch string) bool {
	switch ch {
	case ChannelHandoff, ChannelQuery, ChannelCoordination, ChannelNotification, ChannelHealth:
		return true
	}
	return isCustom(ch)
}

func isCustom(s string) bool { return len(s) > 2 && strings.HasPrefix(s, "x-") }

// allowedIntents is the table of type/intent combinations that make sense (docs/protocol.md,
// "Types and intents"). Custom `x-` intents are allowed with request, response and event.
var allowedIntents = map[Type][]Intent{
	TypeRequest:   {IntentHandoff, IntentQuery, IntentNegotiate, IntentHealth, IntentNotify},
	TypeResponse:  {IntentHandoff, IntentQuery, IntentNegotiate, IntentHealth, IntentNotify},
	TypeEvent:     {IntentNotify, IntentHandoff, IntentNegotiate, IntentHealth},
	TypeError:     {IntentHandoff, IntentQuery, IntentNegotiate, IntentNotify, IntentHealth},
	TypeHeartbeat: {IntentHealth},
}

// IntentAllowed reports whether intent makes sense with type t.
func IntentAllowed(t Type, intent Intent) bool {
	allowed, ok := allowedIntents[t]
	if !ok {
		return false
	}
	for _, a := range allowed {
		if a == intent {
			return true
		}
	}
	return t != TypeHeartbeat && isCustom(string(intent))
}

// DefaultChannel is the channel a builder uses for an intent when the caller names none.
func DefaultChannel(intent Intent) string {
	switch intent {
	case IntentHandoff:
		return ChannelHandoff
	case IntentQuery:
		return ChannelQuery
	case IntentNegotiate:
		return ChannelCoordination
	case IntentHealth:
		return ChannelHealth
	default:
		return ChannelNotification
	}
}
