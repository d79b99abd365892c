package protocol

import (
	"strings"
	"testing"
)

func TestSecurity_RoundTripsAndRefusesMalformed(t *testing.T) {
	var m Message
	if s, err := m.Security(); err != nil || s.AuthToken != "" || s.Permissions != nil {
		t.Fatalf("a document without security: %+v %v", s, err)
	}
	WithSecurity(Security{AuthToken: "a.b.c", Permissions: []string{"deploy"}})(&m)
	s, err := m.Security()
	if err != nil || s.AuthToken != "a.b.c" || len(s.Permissions) != 1 || s.Permissions[0] != "deploy" {
		t.Fatalf("round trip: %+v %v", s, err)
	}
	WithSecurity(Security{RequireApproval: true})(&m)
	if s, err := m.Security(); err != nil || !s.RequireApproval || string(m.Extra["security"]) != `{"require_approval":true}` {
		t.Fatalf("require_approval: %+v %v (%s)", s, err, m.Extra["security"])
	}
	WithSecurity(Security{})(&m)
	if _, ok := m.Extra["security"]; ok {
		t.Fatal("a zero Security must remove the member")
	}
	for _, bad := range []string{`"token"`, `{"auth_token": 5}`, `{"permissions": "deploy"}`, `{"require_approval": "yes"}`} {
		m.Extra = Extra{"security": []byte(bad)}
		if _, err := m.Security(); CodeOf(err) != CodePayloadInvalid {
			t.Errorf("security %s: %v; want PAYLOAD_INVALID", bad, err)
		}
	}
	m.Extra = Extra{"security": []byte(`{"permissions": [` + strings.Repeat(`"p",`, MaxPermissions) + `"p"]}`)}
	if _, err := m.Security(); CodeOf(err) != CodePayloadInvalid {
		t.Errorf("%d permissions: %v; want PAYLOAD_INVALID", MaxPermissions+1, err)
	}
}

// FuzzSecurity: any security member decodes to a Security or a PAYLOAD_INVALID error, never a
// panic, and what decodes is within MaxPermissions and sets back to an equal member.
func FuzzSecurity(f *testing.F) {
	for _, s := range []string{`{"auth_token":"a.b.c","permissions":["deploy"]}`, `null`, `{}`, `[]`, `{"permissions":[1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m := Message{Extra: Extra{"security": raw}}
		s, err := m.Security()
		if err != nil {
			if CodeOf(err) != CodePayloadInvalid {
				t.Fatalf("error %v is not PAYLOAD_INVALID", err)
			}
			return
		}
		if len(s.Permissions) > MaxPermissions {
			t.Fatalf("%d permissions decoded", len(s.Permissions))
		}
		var again Message
		WithSecurity(s)(&again)
		back, err := again.Security()
		if err != nil || back.AuthToken != s.AuthToken || len(back.Permissions) != len(s.Permissions) || back.RequireApproval != s.RequireApproval {
			t.Fatalf("set back: %+v %v, want %+v", back, err, s)
		}
	})
}
