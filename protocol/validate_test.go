package protocol_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// validate runs Validate at fixedNow with the default limits.
func validate(m *protocol.Message) error { return protocol.Validate(m, fixedNow, 0, protocol.Limits{}) }

func TestValidate_ValidRequestPasses(t *testing.T) {
	if err := validate(validRequest(t)); err != nil {
		t.Fatal(err)
	}
}

func TestEnvelope_Version_RejectsOtherMajorListingSupported(t *testing.T) {
	for _, v := range []string{"2.0", "0.9", "10.0", "1", "", "one.zero"} {
		m := validRequest(t)
		m.Envelope.Version = v
		pe := wantCode(t, validate(m), protocol.CodeVersionUnsupported)
		if !strings.Contains(pe.Message, "supported: 1.0") {
			t.Errorf("version %q: message %q does not list the supported versions", v, pe.Message)
		}
		detail, _ := pe.Detail.(map[string]any)
		if !reflect.DeepEqual(detail["supported_versions"], protocol.SupportedVersions) {
			t.Errorf("version %q: detail %v does not carry supported_versions", v, pe.Detail)
		}
	}
}

func TestEnvelope_Version_AcceptsAnyMinor(t *testing.T) {
	for _, v := range []string{"1.0", "1.1", "1.99", "1.0.3"} {
		m := validRequest(t)
		m.Envelope.Version = v
		if err := validate(m); err != nil {
			t.Errorf("version %q: %v", v, err)
		}
	}
}

func TestEnvelope_MessageID_MustBeAUUID(t *testing.T) {
	for _, id := range []string{"", "not-a-uuid", "0190f5a47c3e70008000000000000001", "{0190f5a4-7c3e-7000-8000-000000000001}",
		"urn:uuid:0190f5a4-7c3e-7000-8000-000000000001", "0190f5a4-7c3e-7000-8000-00000000000g"} {
		m := validRequest(t)
		m.Envelope.MessageID = id
		wantCode(t, validate(m), protocol.CodePayloadInvalid)
	}
	// Any RFC 9562 UUID is accepted on input, not only v7.
	m := validRequest(t)
	m.Envelope.MessageID = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"
	if err := validate(m); err != nil {
		t.Fatalf("UUIDv4 refused: %v", err)
	}
}

func TestEnvelope_CorrelationID_AtMost128Characters(t *testing.T) {
	m := validRequest(t)
	m.Envelope.CorrelationID = strings.Repeat("c", 128)
	if err := validate(m); err != nil {
		t.Fatal(err)
	}
	m.Envelope.CorrelationID += "c"
	wantCode(t, validate(m), protocol.CodePayloadInvalid)
}

func TestSecurity_Timestamp_ToleratesThirtySecondsOfDrift(t *testing.T) {
	at := func(d time.Duration) *protocol.Message {
		m := validRequest(t)
		m.Envelope.Timestamp = fixedNow.Add(d).Format(protocol.TimestampFormat)
		return m
	}
	for _, d := range []time.Duration{29 * time.Second, 30 * time.Second, -time.Minute} {
		if err := validate(at(d)); err != nil {
			t.Errorf("timestamp now%+v: %v", d, err)
		}
	}
	wantCode(t, validate(at(31*time.Second)), protocol.CodePayloadInvalid)
	wantCode(t, validate(at(time.Hour)), protocol.CodePayloadInvalid)
	// The tolerance is a limit like the others.
	if err := protocol.Validate(at(31*time.Second), fixedNow, 0, protocol.Limits{MaxClockSkew: time.Minute}); err != nil {
		t.Errorf("MaxClockSkew 1m refused 31s: %v", err)
	}
}

func TestEnvelope_Timestamp_MustBeRFC3339(t *testing.T) {
	for _, ts := range []string{"", "2026-05-01 12:00:00", "1714564800", "2026-05-01T12:00:00"} {
		m := validRequest(t)
		m.Envelope.Timestamp = ts
		wantCode(t, validate(m), protocol.CodePayloadInvalid)
	}
	m := validRequest(t)
	m.Envelope.Timestamp = "2026-05-01T14:00:00+02:00" // offsets are RFC 3339 too
	if err := validate(m); err != nil {
		t.Fatal(err)
	}
}

func TestSecurity_TTL_PassedIsTimeout(t *testing.T) {
	m := validRequest(t) // timestamp fixedNow, ttl 3600 s
	if err := protocol.Validate(m, fixedNow.Add(time.Hour-time.Millisecond), 0, protocol.Limits{}); err != nil {
		t.Fatalf("just before expiry: %v", err)
	}
	wantCode(t, protocol.Validate(m, fixedNow.Add(time.Hour), 0, protocol.Limits{}), protocol.CodeTimeout)
	wantCode(t, protocol.Validate(m, fixedNow.Add(48*time.Hour), 0, protocol.Limits{}), protocol.CodeTimeout)
	if got, want := m.Expires(), fixedNow.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("Expires = %v, want %v", got, want)
	}
}

func TestEnvelope_TTL_Bounds(t *testing.T) {
	for _, ttl := range []int64{0, -1, int64(protocol.DefaultMaxTTL/time.Second) + 1} {
		m := validRequest(t)
		m.Envelope.TTLSeconds = ttl
		wantCode(t, validate(m), protocol.CodePayloadInvalid)
	}
	m := validRequest(t)
	m.Envelope.TTLSeconds = int64(protocol.DefaultMaxTTL / time.Second)
	if err := validate(m); err != nil {
		t.Fatalf("ttl at the bound: %v", err)
	}
}

func TestAgentID_Syntax(t *testing.T) {
	ok := []string{"a:b:c", "acme:host-1:planner", "ACME.io:h_1:Agent-2.v3", "0:0:0",
		strings.Repeat("n", 20) + ":" + strings.Repeat("h", 21) + ":" + strings.Repeat("a", 21)} // 64 chars
	bad := []string{"", "a:b", "a:b:c:d", "a::c", ":b:c", "a:b:", "-a:b:c", "a:.b:c", "a:b:c d", "a:b:cé",
		"a/b:c:d", strings.Repeat("n", 21) + ":" + strings.Repeat("h", 21) + ":" + strings.Repeat("a", 21)} // 65 chars
	for _, id := range ok {
		if len(id) > protocol.MaxAgentIDLength {
			t.Fatalf("test id %q is too long", id)
		}
		if err := protocol.ValidateAgentID(id); err != nil {
			t.Errorf("ValidateAgentID(%q): %v", id, err)
		}
		if err := protocol.ValidateRecipientID(id); err != nil {
			t.Errorf("ValidateRecipientID(%q): %v", id, err)
		}
	}
	for _, id := range bad {
		wantCode(t, protocol.ValidateAgentID(id), protocol.CodePayloadInvalid)
		wantCode(t, protocol.ValidateRecipientID(id), protocol.CodePayloadInvalid)
	}
}

func TestAgentID_WildcardsOnlyInRecipients(t *testing.T) {
	for _, id := range []string{"*", "*:*:builder", "acme:*:*", "*:*:*"} {
		if err := protocol.ValidateRecipientID(id); err != nil {
			t.Errorf("recipient %q: %v", id, err)
		}
		wantCode(t, protocol.ValidateAgentID(id), protocol.CodePayloadInvalid)
	}
	for _, id := range []string{"acme:host*:a", "**", "*:*", "a:b:c*"} {
		wantCode(t, protocol.ValidateRecipientID(id), protocol.CodePayloadInvalid)
	}
	m := validRequest(t)
	m.Envelope.Sender.AgentID = "*:*:planner"
	wantCode(t, validate(m), protocol.CodePayloadInvalid)
	m = validRequest(t)
	m.Envelope.Recipient.AgentID = "*:*:analyst"
	if err := validate(m); err != nil {
		t.Fatal(err)
	}
}

func TestAgentID_MatchAgent(t *testing.T) {
	for _, c := range []struct {
		pattern, id string
		want        bool
	}{
		{"*", "a:b:c", true}, {"a:b:c", "a:b:c", true}, {"*:*:c", "a:b:c", true}, {"a:*:*", "a:x:y", true},
		{"a:b:c", "a:b:d", false}, {"*:*:c", "a:b:d", false}, {"b:*:*", "a:b:c", false},
	} {
		if got := protocol.MatchAgent(c.pattern, c.id); got != c.want {
			t.Errorf("MatchAgent(%q, %q) = %v", c.pattern, c.id, got)
		}
	}
	if !protocol.IsWildcard("*:*:c") || protocol.IsWildcard("a:b:c") {
		t.Error("IsWildcard")
	}
}

func TestEnvelope_Sender_PeerIDRequired(t *testing.T) {
	m := validRequest(t)
	m.Envelope.Sender.PeerID = ""
	wantCode(t, validate(m), protocol.CodeIdentityInvalid)
}

func TestEnvelope_Channel_FiveStandardAndCustom(t *testing.T) {
	for _, ch := range append([]string{"x-billing", "x-a"}, protocol.StandardChannels...) {
		m := validRequest(t)
		m.Envelope.Recipient.Channel = ch
		if err := validate(m); err != nil {
			t.Errorf("channel %q: %v", ch, err)
		}
	}
	if len(protocol.StandardChannels) != 5 {
		t.Fatalf("StandardChannels = %v", protocol.StandardChannels)
	}
	for _, ch := range []string{"", "x-", "billing", "Query", "X-billing"} {
		m := validRequest(t)
		m.Envelope.Recipient.Channel = ch
		wantCode(t, validate(m), protocol.CodeChannelUnknown)
	}
}

func TestMessage_TypeIntentTable(t *testing.T) {
	all := []protocol.Intent{protocol.IntentHandoff, protocol.IntentQuery, protocol.IntentNegotiate, protocol.IntentNotify, protocol.IntentHealth}
	want := map[protocol.Type][]protocol.Intent{
		protocol.TypeRequest:   all,
		protocol.TypeResponse:  all,
		protocol.TypeError:     all,
		protocol.TypeEvent:     {protocol.IntentHandoff, protocol.IntentNegotiate, protocol.IntentNotify, protocol.IntentHealth},
		protocol.TypeHeartbeat: {protocol.IntentHealth},
	}
	for typ, allowed := range want {
		for _, intent := range all {
			if got := protocol.IntentAllowed(typ, intent); got != containsIntent(allowed, intent) {
				t.Errorf("IntentAllowed(%s, %s) = %v", typ, intent, got)
			}
		}
		custom := typ != protocol.TypeHeartbeat
		if got := protocol.IntentAllowed(typ, "x-custom"); got != custom {
			t.Errorf("IntentAllowed(%s, x-custom) = %v, want %v", typ, got, custom)
		}
		if protocol.IntentAllowed(typ, "x-") || protocol.IntentAllowed(typ, "bogus") || protocol.IntentAllowed(typ, "") {
			t.Errorf("%s accepts a malformed intent", typ)
		}
	}
	if protocol.IntentAllowed("command", protocol.IntentQuery) {
		t.Error("unknown type accepted")
	}
}

func containsIntent(list []protocol.Intent, i protocol.Intent) bool {
	for _, x := range list {
		if x == i {
			return true
		}
	}
	return false
}

func TestMessage_TypeIntent_ValidateRefusesNonsense(t *testing.T) {
	for _, c := range []struct {
		typ    protocol.Type
		intent protocol.Intent
	}{{"command", protocol.IntentQuery}, {"", protocol.IntentQuery}, {protocol.TypeEvent, protocol.IntentQuery},
		{protocol.TypeHeartbeat, protocol.IntentNotify}, {protocol.TypeRequest, "bogus"}} {
		m := validRequest(t)
		m.Message.Type, m.Message.Intent = c.typ, c.intent
		wantCode(t, validate(m), protocol.CodePayloadInvalid)
	}
	m := validRequest(t)
	m.Message.Intent = "x-translate"
	if err := validate(m); err != nil {
		t.Fatal(err)
	}
}

// nested returns a payload object nested n levels deep (the payload itself is level 1).
func nested(n int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1))
}

func TestMessage_Payload_Nesting10OK11Refused(t *testing.T) {
	m := validRequest(t)
	m.Message.Payload = nested(10)
	if err := validate(m); err != nil {
		t.Fatalf("10 levels: %v", err)
	}
	m.Message.Payload = nested(11)
	wantCode(t, validate(m), protocol.CodePayloadInvalid)
	// Arrays count as levels too.
	m.Message.Payload = json.RawMessage(`{"a":` + strings.Repeat("[", 10) + strings.Repeat("]", 10) + `}`)
	wantCode(t, validate(m), protocol.CodePayloadInvalid)
	// Brackets inside strings do not.
	m.Message.Payload = json.RawMessage(`{"a":"` + strings.Repeat("{[", 50) + `"}`)
	if err := validate(m); err != nil {
		t.Fatalf("brackets in a string: %v", err)
	}
}

func TestMessage_Payload_MustBeAnObject(t *testing.T) {
	for _, p := range []string{`[]`, `"text"`, `42`, `null`} {
		m := validRequest(t)
		m.Message.Payload = json.RawMessage(p)
		wantCode(t, validate(m), protocol.CodePayloadInvalid)
	}
}

func TestLimits_MessageSize(t *testing.T) {
	m := validRequest(t)
	doc := mustEncode(t, m, protocol.JSON)
	lim := protocol.Limits{MaxMessageBytes: len(doc)}
	if err := protocol.Validate(m, fixedNow, 0, lim); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	lim.MaxMessageBytes--
	wantCode(t, protocol.Validate(m, fixedNow, 0, lim), protocol.CodePayloadInvalid)
	// The size as received counts, when the caller passes it.
	wantCode(t, protocol.Validate(m, fixedNow, protocol.DefaultMaxMessageBytes+1, protocol.Limits{}), protocol.CodePayloadInvalid)
	if err := protocol.Validate(m, fixedNow, protocol.MaxGossipBytes, protocol.Limits{}); err != nil {
		t.Fatal(err)
	}
}

func TestMessage_Payloads_NodeUnderstoodTypesAreChecked(t *testing.T) {
	for name, c := range map[string]struct {
		typ     protocol.Type
		intent  protocol.Intent
		payload string
		ok      bool
	}{
		"error with code":        {protocol.TypeError, protocol.IntentQuery, `{"code":"TIMEOUT","message":"late"}`, true},
		"error without code":     {protocol.TypeError, protocol.IntentQuery, `{"message":"late"}`, false},
		"heartbeat alive":        {protocol.TypeHeartbeat, protocol.IntentHealth, `{"status":"alive","load":0.5,"active_tasks":2}`, true},
		"heartbeat bad status":   {protocol.TypeHeartbeat, protocol.IntentHealth, `{"status":"sleepy"}`, false},
		"heartbeat load above 1": {protocol.TypeHeartbeat, protocol.IntentHealth, `{"status":"busy","load":1.5}`, false},
		"heartbeat negative":     {protocol.TypeHeartbeat, protocol.IntentHealth, `{"status":"busy","active_tasks":-1}`, false},
		"response accepted":      {protocol.TypeResponse, protocol.IntentQuery, `{"status":"accepted"}`, true},
		"response no status":     {protocol.TypeResponse, protocol.IntentQuery, `{}`, false},
		"event with type":        {protocol.TypeEvent, protocol.IntentNotify, `{"event_type":"deploy","severity":"warning"}`, true},
		"event without type":     {protocol.TypeEvent, protocol.IntentNotify, `{"severity":"info"}`, false},
		"event bad severity":     {protocol.TypeEvent, protocol.IntentNotify, `{"event_type":"x","severity":"fatal"}`, false},
		"error wrong field type": {protocol.TypeError, protocol.IntentQuery, `{"code":5}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			m := validRequest(t)
			m.Message.Type, m.Message.Intent, m.Message.Payload = c.typ, c.intent, json.RawMessage(c.payload)
			err := validate(m)
			if c.ok && err != nil {
				t.Fatal(err)
			}
			if !c.ok {
				wantCode(t, err, protocol.CodePayloadInvalid)
			}
		})
	}
}
