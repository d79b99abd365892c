package protocol_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestErrors_RegistryHasElevenCodesWithRetryFlags(t *testing.T) {
	want := map[protocol.Code]bool{ // code -> retryable
		protocol.CodeVersionUnsupported: false,
		protocol.CodeIdentityInvalid:    false,
		protocol.CodeCapabilityMismatch: false,
		protocol.CodeRateLimited:        true,
		protocol.CodeTimeout:            true,
		protocol.CodeChannelUnknown:     false,
		protocol.CodePayloadInvalid:     false,
		protocol.CodeInternalError:      true,
		protocol.CodeAgentNotFound:      true,
		protocol.CodePermissionDenied:   false,
		protocol.CodeDuplicate:          false,
	}
	codes := protocol.Codes()
	if len(codes) != 11 || len(want) != 11 {
		t.Fatalf("registry has %d codes, want 11", len(codes))
	}
	for i, info := range codes {
		if i > 0 && codes[i-1].Code >= info.Code {
			t.Fatal("Codes() is not sorted")
		}
		retry, ok := want[info.Code]
		if !ok {
			t.Fatalf("unexpected code %s", info.Code)
		}
		if info.Retryable != retry || info.Code.Retryable() != retry {
			t.Errorf("%s: retryable %v, want %v", info.Code, info.Retryable, retry)
		}
		if info.Description == "" {
			t.Errorf("%s has no description", info.Code)
		}
		if got, ok := protocol.Lookup(info.Code); !ok || got != info {
			t.Errorf("Lookup(%s) = %v, %v", info.Code, got, ok)
		}
	}
	if _, ok := protocol.Lookup("NOPE"); ok || protocol.Code("NOPE").Retryable() {
		t.Error("an unknown code is registered or retryable")
	}
}

func TestErrors_IsMatchesByCode(t *testing.T) {
	err := fmt.Errorf("handling: %w", protocol.Errorf(protocol.CodeTimeout, "late by %d s", 3))
	if !errors.Is(err, protocol.ErrTimeout) || errors.Is(err, protocol.ErrDuplicate) {
		t.Fatal("errors.Is does not match by code")
	}
	if protocol.CodeOf(err) != protocol.CodeTimeout {
		t.Fatalf("CodeOf = %s", protocol.CodeOf(err))
	}
	if protocol.CodeOf(io.EOF) != protocol.CodeInternalError || protocol.CodeOf(nil) != "" {
		t.Fatal("CodeOf of a plain error or nil")
	}
	if got := err.Error(); got != "handling: TIMEOUT: late by 3 s" {
		t.Fatalf("Error() = %q", got)
	}
	if protocol.ErrTimeout.Error() != "TIMEOUT" {
		t.Fatalf("sentinel Error() = %q", protocol.ErrTimeout.Error())
	}
}

func TestErrors_ErrorfWrapsItsCause(t *testing.T) {
	err := protocol.Errorf(protocol.CodePayloadInvalid, "decode: %w", io.ErrUnexpectedEOF)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, protocol.ErrPayloadInvalid) {
		t.Fatal("cause or code lost")
	}
}

func TestErrors_PayloadRoundTrip(t *testing.T) {
	p := protocol.ErrorPayload{Code: protocol.CodeRateLimited, Message: "slow down", RetryAfter: 2.5, Retryable: true}
	e := p.AsError()
	if e.Code != protocol.CodeRateLimited || e.RetryAfter != 2500*time.Millisecond || e.Message != "slow down" {
		t.Fatalf("AsError = %+v", e)
	}
	// An absurd retry_after does not overflow into a negative duration.
	if d := (protocol.ErrorPayload{Code: protocol.CodeRateLimited, RetryAfter: 1e300}).AsError().RetryAfter; d <= 0 {
		t.Fatalf("RetryAfter for 1e300 s = %v", d)
	}
}
