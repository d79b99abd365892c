package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/iacp-node/iacp-node/protocol"
)

// askOnce runs one exchange of a request/answer protocol (certificate, join, authority): it
// opens a stream to p, writes req as one JSON frame, closes its side, and decodes one answer
// frame of at most maxAnswer bytes into ans. Everything, dial included, ends within timeout
// (or ctx's deadline when sooner).
func askOnce(ctx context.Context, h host.Host, p peer.ID, proto libp2pproto.ID, timeout time.Duration, req any, maxAnswer int, ans any) error {
	raw, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := h.NewStream(network.WithAllowLimitedConn(ctx, string(proto)), p, proto)
	if err != nil {
		return err
	}
	defer s.Close()
	deadline, _ := ctx.Deadline()
	_ = s.SetDeadline(deadline)
	// The deadline ends a read on a transport that keeps deadlines; the context ends it on
	// any, and when the caller gives up before the deadline.
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	if err := protocol.WriteFrame(s, raw); err != nil {
		s.Reset()
		return ended(ctx, err)
	}
	_ = s.CloseWrite()
	body, err := protocol.ReadFrame(s, maxAnswer)
	if err != nil {
		s.Reset()
		return ended(ctx, err)
	}
	return json.Unmarshal(body, ans)
}

// ended returns err, naming also why ctx ended if it did: a stream reset because the peer let
// the deadline pass reads as a timeout.
func ended(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}

// tracked wraps the handler of a request/answer protocol (certificate, join, authority) so
// that it counts as an exchange in flight, as handleStream does: Close waits for it (a join
// that marked its invitation used gets to send the certificate), and a stream that arrives
// once Close has begun is reset.
func (n *Node) tracked(h network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) {
		if !n.track() {
			s.Reset()
			return
		}
		defer n.inflight.Done()
		h(s)
	}
}
