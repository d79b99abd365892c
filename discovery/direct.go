package discovery

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// RecordProtocolSuffix is appended to the protocol prefix to name the direct record protocol
// ("/iacp/agent-record/1.0.0" by default). A node answers a stream on it with one frame: its own
// current signed agent record, the exact bytes it last stored in the DHT (a Left record after
// Leave), or an empty frame when it has published nothing. The dialler sends nothing.
const RecordProtocolSuffix = "/agent-record/1.0.0"

// errNoDirectRecord says the peer answered that it has published nothing.
var errNoDirectRecord = errors.New("the peer has published no agent record")

// recordProtocol is the direct record protocol id under the configured prefix.
func (d *Discovery) recordProtocol() protocol.ID {
	return protocol.ID(d.cfg.prefix + RecordProtocolSuffix)
}

// setServed remembers the signed record the direct record protocol answers with, unless a
// record with a higher seq was stored meanwhile (a slow republish finishing after Leave).
func (d *Discovery) setServed(val []byte, seq uint64) {
	d.mu.Lock()
	if d.served == nil || seq >= d.servedSeq {
		d.served, d.servedSeq = val, seq
	}
	d.mu.Unlock()
}

func (d *Discovery) servedRecord() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.served
}

// handleRecordStream answers one direct record request: one frame, then Close. Every write is
// bounded by the direct fetch timeout; on error the stream is reset.
func (d *Discovery) handleRecordStream(s network.Stream) {
	if !d.track() {
		_ = s.Reset()
		return
	}
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.directTimeout)
	defer cancel()
	// mocknet streams ignore deadlines: a reset on expiry unblocks the write everywhere.
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	_ = s.SetDeadline(time.Now().Add(d.cfg.directTimeout))
	if err := writeFrame(s, d.servedRecord()); err != nil {
		d.log.Debug("direct record request not answered", "remote", s.Conn().RemotePeer().String(), "err", err)
		_ = s.Reset()
		return
	}
	if stop() {
		_ = s.Close()
	} // else the expiry reset the stream
}

// writeFrame writes a uvarint length and the bytes.
func writeFrame(w io.Writer, b []byte) error {
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(b)))
	buf := make([]byte, 0, n+len(b))
	buf = append(append(buf, hdr[:n]...), b...)
	_, err := w.Write(buf)
	return err
}

// readFrame reads one uvarint-length-prefixed frame of at most max bytes. A longer announced
// length is refused before anything is allocated for it.
func readFrame(r io.Reader, max int) ([]byte, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, int64(max)+binary.MaxVarintLen64), 512)
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("read frame length: %w", err)
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("frame of %d bytes announced; at most %d are allowed", n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("read frame of %d bytes: %w", n, err)
	}
	return b, nil
}

// fetchDirect asks peer id for its current agent record over the direct record protocol and
// returns it only if the Validator accepts it under PeerKey(id): well formed, signed by the key
// of the peer it names, that peer is id (the one dialled), not expired, not immortal, its seq
// not in the future and, with WithCertCheck, its certificate binding the agent to id.
func (d *Discovery) fetchDirect(ctx context.Context, id peer.ID) (Record, error) {
	v := d.validator(PeerNamespace)
	if id == d.h.ID() {
		val := d.servedRecord()
		if val == nil {
			return Record{}, errNoDirectRecord
		}
		return v.check(PeerKey(id), val)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.directTimeout)
	defer cancel()
	s, err := d.h.NewStream(ctx, id, d.recordProtocol())
	if err != nil {
		return Record{}, fmt.Errorf("open direct record stream: %w", err)
	}
	// mocknet streams ignore deadlines: a reset on expiry unblocks the read everywhere.
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	_ = s.SetDeadline(time.Now().Add(d.cfg.directTimeout))
	val, err := readFrame(s, MaxRecordBytes)
	if err == nil && len(val) == 0 {
		err = errNoDirectRecord
	}
	if err != nil {
		_ = s.Reset()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return Record{}, err
	}
	if stop() {
		_ = s.Close()
	} // else the expiry reset the stream after the whole frame was read: the frame stands.
	return v.check(PeerKey(id), val)
}
