package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

func dialWS(t *testing.T, ctx context.Context, s *Server) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, "ws://"+s.Addr()+ConnectPath, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + s.Token()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	return c
}

// readDoc reads frames until an IACP document arrives (result frames are skipped).
func readDoc(t *testing.T, ctx context.Context, c *websocket.Conn) *protocol.Message {
	t.Helper()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := protocol.DecodeJSON(data); err == nil && m.Envelope.MessageID != "" {
			return m
		}
	}
}

func readResult(t *testing.T, ctx context.Context, c *websocket.Conn) ResultFrame {
	t.Helper()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f ResultFrame
		if json.Unmarshal(data, &f) == nil && (f.Sent != "" || f.Acked != "" || f.Error != nil) {
			return f
		}
	}
}

// An agent on the WebSocket receives a message, disconnects before acknowledging it, gets it
// again on reconnect, acknowledges it, and then it is gone. It also sends a message on the
// socket, which the server reports as sent, and that arrives at the recipient.
func TestE2E_WebSocketResumeAndAck(t *testing.T) {
	m := newAPIMesh(t, 3, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	res, err := m.clients[0].Send(ctx, request(agentName(1), protocol.IntentHandoff, `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	c := dialWS(t, ctx, m.servers[1])
	if got := readDoc(t, ctx, c); got.Envelope.MessageID != res.MessageID {
		t.Fatalf("got %s, want %s", got.Envelope.MessageID, res.MessageID)
	}
	c.CloseNow() // gone without an ack
	c = dialWS(t, ctx, m.servers[1])
	defer c.CloseNow()
	if got := readDoc(t, ctx, c); got.Envelope.MessageID != res.MessageID {
		t.Fatalf("after reconnect got %s, want the unacknowledged %s", got.Envelope.MessageID, res.MessageID)
	}
	ack, _ := json.Marshal(AckFrame{Ack: res.MessageID})
	if err := c.Write(ctx, websocket.MessageText, ack); err != nil {
		t.Fatal(err)
	}
	if f := readResult(t, ctx, c); f.Acked != res.MessageID {
		t.Fatalf("ack result %+v", f)
	}
	if m.nodes[1].Inbox().Len() != 0 {
		t.Fatal("ack did not take the message")
	}
	// Send on the socket: agent 1 -> agent 2.
	doc, _ := json.Marshal(request(agentName(2), protocol.IntentNotify, `{"hello":true}`))
	if err := c.Write(ctx, websocket.MessageText, doc); err != nil {
		t.Fatal(err)
	}
	f := readResult(t, ctx, c)
	if f.Sent == "" || f.Error != nil {
		t.Fatalf("send result %+v", f)
	}
	in, err := m.clients[2].Inbox(ctx, 0, 5*time.Second)
	if err != nil || len(in.Messages) != 1 || in.Messages[0].Message.Envelope.MessageID != f.Sent {
		t.Fatalf("recipient inbox %+v, %v", in, err)
	}
	// A second connection sees nothing old: the acknowledged message is gone for good.
	c.Close(websocket.StatusNormalClosure, "")
	c2 := dialWS(t, ctx, m.servers[1])
	defer c2.CloseNow()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, data, err := c2.Read(short); err == nil {
		t.Fatalf("acknowledged message offered again: %s", data)
	}
}

// A client that does not answer pings is dropped by the server's heartbeat.
func TestE2E_WebSocketHeartbeatDropsSilentClient(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{server: func(int) []Option { return []Option{WithPing(50*time.Millisecond, 50*time.Millisecond)} }})
	ctx := testCtx(t, 10*time.Second)
	c := dialWS(t, ctx, m.servers[0])
	defer c.CloseNow()
	// Never reading means never answering pings (pongs are sent by Read). The server must
	// close the connection; a write then eventually fails.
	testsupport.WaitFor(t, 5*time.Second, "server drops the silent client", func() bool {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, []byte(`{"ack":"x"}`)) != nil
	})
}

// A WebSocket without the token is refused with 401.
func TestE2E_WebSocketNeedsToken(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{})
	ctx := testCtx(t, 5*time.Second)
	_, resp, err := websocket.Dial(ctx, "ws://"+m.servers[0].Addr()+ConnectPath, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial without token: %v", err)
	}
}
