package node

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// rawClient speaks /iacp/1.0.0 by hand from one node's host to another, to send what a well
// behaved node never would.
type rawClient struct {
	t  *testing.T
	s  network.Stream
	br *bufio.Reader
}

func dialRaw(t *testing.T, from, to *Node) *rawClient {
	t.Helper()
	s, err := from.host.NewStream(testCtx(t), to.ID(), ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Reset() })
	return &rawClient{t: t, s: s, br: bufio.NewReader(s)}
}

func (c *rawClient) sendRaw(b []byte) {
	c.t.Helper()
	if err := protocol.WriteFrame(c.s, b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) send(m *protocol.Message) {
	c.t.Helper()
	b, err := protocol.EncodeJSON(m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

// next reads the next reply frame; a reset stream is an error.
func (c *rawClient) next() (*protocol.Message, error) {
	raw, err := protocol.ReadFrame(c.br, protocol.DefaultMaxMessageBytes)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeJSON(raw)
}

// refusal sends m and returns the code of the error that comes back.
func (c *rawClient) refusal(m *protocol.Message) (protocol.Code, *protocol.Error) {
	c.t.Helper()
	c.send(m)
	reply, err := c.next()
	if err != nil {
		c.t.Fatalf("no reply: %v", err)
	}
	if reply.Message.Type != protocol.TypeError {
		return "", nil
	}
	if reply.Envelope.CorrelationID != m.Envelope.MessageID {
		c.t.Fatalf("error correlates to %s, want %s", reply.Envelope.CorrelationID, m.Envelope.MessageID)
	}
	if err := protocol.Verify(reply); err != nil {
		c.t.Fatalf("the refusal itself is not validly signed: %v", err)
	}
	e, _ := protocol.ErrorOf(reply)
	return e.Code, e
}

func (c *rawClient) expectReset() {
	c.t.Helper()
	_, err := c.next()
	if err == nil || errors.Is(err, io.EOF) {
		c.t.Fatalf("stream was not reset (err %v)", err)
	}
}

func event(t *testing.T, b *protocol.Builder, to string) *protocol.Message {
	t.Helper()
	m, err := b.Event(to, protocol.IntentNotify, protocol.EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func expectCode(t *testing.T, got, want protocol.Code) {
	t.Helper()
	if got != want {
		t.Fatalf("refused with %q, want %q", got, want)
	}
}

// Security "Identity Spoofing": a message whose signature does not verify is refused.
func TestInbound_ForgedSignatureIsIdentityInvalid(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	ev := event(t, m.nodes[0].Builder(), agentName(1))
	ev.Message.Payload = []byte(`{"event_type":"tampered"}`)
	code, _ := dialRaw(t, m.nodes[0], m.nodes[1]).refusal(ev)
	expectCode(t, code, protocol.CodeIdentityInvalid)
}

// sender.peer_id must be the authenticated remote peer: a message validly signed by another
// key, relayed on this connection, is refused.
func TestInbound_PeerIDMismatchIsIdentityInvalid(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	other, _, _ := crypto.GenerateEd25519Key(nil)
	ob, _ := protocol.NewBuilder("test:mesh:mallory", other, nil)
	code, _ := dialRaw(t, m.nodes[0], m.nodes[1]).refusal(event(t, ob, agentName(1)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
}

// Security "Replay Attacks": a repeated message_id within its TTL is DUPLICATE.
func TestInbound_ReplayIsDuplicate(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	ev := event(t, m.nodes[0].Builder(), agentName(1))
	c.send(ev)
	if r, err := c.next(); err != nil || r.Message.Type != protocol.TypeResponse {
		t.Fatalf("first copy: %v %v", r, err)
	}
	code, _ := c.refusal(ev)
	expectCode(t, code, protocol.CodeDuplicate)
}

// Field "ttl_seconds": after expiry the message MUST NOT be processed.
func TestInbound_ExpiredIsTimeout(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	past := func() time.Time { return time.Now().Add(-2 * time.Hour) }
	old, _ := protocol.NewBuilder(agentName(0), m.keys[0], past)
	code, _ := dialRaw(t, m.nodes[0], m.nodes[1]).refusal(event(t, old, agentName(1)))
	expectCode(t, code, protocol.CodeTimeout)
}

// A frame longer than the limit resets the stream before anything is allocated for it.
func TestInbound_OversizeFrameResetsStream(t *testing.T) {
	m := newMesh(t, 2, nil, func(i int, _ *mesh) []Option {
		return []Option{func(c *Config) error { c.MaxMessageBytes = 4096; return nil }}
	})
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<30)
	_, _ = c.s.Write(hdr[:])
	c.expectReset()
}

// A message for another agent is refused with AGENT_NOT_FOUND.
func TestInbound_WrongRecipientIsAgentNotFound(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	code, _ := dialRaw(t, m.nodes[0], m.nodes[1]).refusal(event(t, m.nodes[0].Builder(), "test:mesh:someone-else"))
	expectCode(t, code, protocol.CodeAgentNotFound)
}

// Field "version": another MAJOR is refused with the list of supported versions.
func TestInbound_OtherMajorIsVersionUnsupported(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	ev := &protocol.Message{}
	ev.Envelope.Version = "2.0"
	ev.Envelope.Recipient.AgentID = agentName(1)
	ev.Message = protocol.Body{Type: protocol.TypeEvent, Intent: protocol.IntentNotify, Payload: []byte(`{"event_type":"x"}`)}
	if err := m.nodes[0].Builder().Seal(ev); err != nil {
		t.Fatal(err)
	}
	code, e := dialRaw(t, m.nodes[0], m.nodes[1]).refusal(ev)
	expectCode(t, code, protocol.CodeVersionUnsupported)
	if !strings.Contains(e.Message, "1.0") {
		t.Fatalf("refusal does not list the supported versions: %q", e.Message)
	}
}

// A stream that sends garbage is reset.
func TestInbound_GarbageResetsStream(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	c.sendRaw([]byte("this is not an IACP document"))
	c.expectReset()
}

// The intent policy answers PERMISSION_DENIED.
func TestInbound_PolicyIsPermissionDenied(t *testing.T) {
	m := newMesh(t, 2, []Option{WithPolicy(PolicyRule{Agents: "test:mesh:*", Intents: []protocol.Intent{protocol.IntentQuery}})}, nil)
	req, _ := m.nodes[0].Builder().Request(agentName(1), protocol.IntentHandoff, nil)
	code, _ := dialRaw(t, m.nodes[0], m.nodes[1]).refusal(req)
	expectCode(t, code, protocol.CodePermissionDenied)
	q, _ := m.nodes[0].Builder().Request(agentName(1), protocol.IntentQuery, nil)
	if _, err := m.nodes[0].Request(testCtx(t), q); err != nil {
		t.Fatalf("an allowed intent was refused: %v", err)
	}
}

// Trust on first use: once an agent id has spoken from one key, another key claiming it is
// IDENTITY_INVALID, and the pin survives a restart (it is in the data directory).
func TestTrust_PinnedAgentFromAnotherKeyIsIdentityInvalid(t *testing.T) {
	m := newMesh(t, 3, nil, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	c.send(event(t, m.nodes[0].Builder(), agentName(1)))
	if _, err := c.next(); err != nil {
		t.Fatal(err)
	}
	impostor, _ := protocol.NewBuilder(agentName(0), m.keys[2], nil)
	code, _ := dialRaw(t, m.nodes[2], m.nodes[1]).refusal(event(t, impostor, agentName(1)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	// The pin reaches the data directory within a maintenance tick (and at Close).
	pins := filepath.Join(m.nodes[1].Config().DataDir, "trust.json")
	testsupport.WaitFor(t, 5*time.Second, "the pin to be saved", func() bool {
		b, err := os.ReadFile(pins)
		return err == nil && strings.Contains(string(b), m.nodes[0].ID().String())
	})
}

// A closed mesh: only allowlisted agent/peer pairs may speak; everyone else is
// IDENTITY_INVALID.
func TestTrust_AllowlistRefusesOthers(t *testing.T) {
	list := filepath.Join(t.TempDir(), "allow.yaml")
	m := newMesh(t, 3, nil, func(i int, m *mesh) []Option {
		if i != 1 {
			return nil
		}
		body := agentName(0) + ": " + peerOf(m.keys[0]) + "\n"
		if err := os.WriteFile(list, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return []Option{WithAllowlist(list)}
	})
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	c.send(event(t, m.nodes[0].Builder(), agentName(1)))
	if r, err := c.next(); err != nil || r.Message.Type != protocol.TypeResponse {
		t.Fatalf("allowlisted agent refused: %v %v", r, err)
	}
	code, _ := dialRaw(t, m.nodes[2], m.nodes[1]).refusal(event(t, m.nodes[2].Builder(), agentName(1)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
}

// lockedBuffer is a log sink that handlers on many goroutines write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A peer whose messages are refused one after another makes the node write one line about it
// per interval, not one per refusal: the log is bounded as the audit log is.
func TestInbound_RefusalsAreLoggedOncePerPeerPerInterval(t *testing.T) {
	var logged lockedBuffer
	mesh := newMesh(t, 2, nil, func(i int, _ *mesh) []Option {
		if i == 1 {
			return []Option{WithLogger(slog.New(slog.NewTextHandler(&logged, nil)))}
		}
		return nil
	})
	c := dialRaw(t, mesh.nodes[0], mesh.nodes[1])
	const refused = 40
	for range refused {
		m := event(t, mesh.nodes[0].Builder(), agentName(1))
		m.Envelope.Version = "9.0" // VERSION_UNSUPPORTED, before any other rule
		if err := protocol.Sign(m, mesh.keys[0]); err != nil {
			t.Fatal(err)
		}
		if code, _ := c.refusal(m); code != protocol.CodeVersionUnsupported {
			t.Fatalf("refused with %q; want VERSION_UNSUPPORTED", code)
		}
	}
	if n := strings.Count(logged.String(), "message refused"); n != 1 {
		t.Fatalf("%d refusals were logged in %d lines; want one line per peer per interval:\n%s", refused, n, logged.String())
	}
}
