package node

import (
	"bytes"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// replyError sends an error message correlated to m on the stream. When not even an error
// can be built for m (its sender agent id is not a valid recipient), the stream is reset.
func (in *inStream) replyError(m *protocol.Message, cause error) {
	e, err := in.n.builder.Error(m, m.Envelope.Sender.AgentID, cause)
	if err != nil {
		in.s.Reset()
		return
	}
	in.write(e)
}

func (in *inStream) queueReceipt(m *protocol.Message) {
	in.wmu.Lock()
	in.batch = append(in.batch, m)
	in.wmu.Unlock()
}

// flush sends one receipt for every message accepted since the last flush.
func (in *inStream) flush() {
	in.wmu.Lock()
	batch := in.batch
	in.batch = nil
	in.wmu.Unlock()
	if len(batch) > 0 {
		in.sendReceipt(batch...)
	}
}

// sendReceipt writes one signed receipt covering ms: a `response` with status `pending` to the
// first message, whose payload lists every covered message id under "receipt".
func (in *inStream) sendReceipt(ms ...*protocol.Message) {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.Envelope.MessageID
	}
	r, err := in.n.builder.Response(ms[0], protocol.ResponsePending, receiptBody{Detail: "received", Receipt: receiptIDs{MessageIDs: ids}})
	if err != nil {
		in.n.log.Error("build receipt", "err", err.Error())
		return
	}
	in.write(r)
}

// write sends one frame with a deadline.
func (in *inStream) write(m *protocol.Message) bool {
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return false
	}
	in.wmu.Lock()
	defer in.wmu.Unlock()
	in.deadline.extend(time.Now(), in.n.cfg.FrameTimeout)
	if err := protocol.WriteFrame(in.s, raw); err != nil {
		// A peer that does not read what it is answered gets no more answers, nor is it read:
		// its next write would wait out the same deadline.
		in.n.log.Debug("write on inbound stream failed; resetting it", "err", err.Error())
		_ = in.s.Reset()
		return false
	}
	return true
}

// receiptOf returns the ids a receipt covers, or nil when m is not a receipt.
func receiptOf(m *protocol.Message) []string {
	if m.Message.Type != protocol.TypeResponse {
		return nil
	}
	// Most responses are answers: one without the word, and without an escape that could
	// spell it, is not a receipt, and its payload need not be decoded to tell.
	if p := m.Message.Payload; !bytes.Contains(p, pendingWord) && bytes.IndexByte(p, '\\') < 0 {
		return nil
	}
	var b struct {
		Status  string     `json:"status"`
		Receipt receiptIDs `json:"receipt"`
	}
	if protocol.DecodePayload(m, &b) != nil || b.Status != protocol.ResponsePending {
		return nil
	}
	return b.Receipt.MessageIDs
}
