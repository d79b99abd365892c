package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// FrameHeaderSize is the size of the length prefix: 4 bytes, big-endian (IaCP 1.0 section 5.2).
const FrameHeaderSize = 4

// ErrFrameTooLarge is returned by ReadFrame when a length prefix exceeds the limit; nothing
// has been allocated for the body. The stream is then unusable and should be reset.
var ErrFrameTooLarge = errors.New("frame exceeds the size limit")

// ErrEmptyFrame is returned by ReadFrame for a zero length prefix: one frame is one message,
// and an empty document is not one.
var ErrEmptyFrame = errors.New("empty frame")

// AppendFrame appends the length prefix and doc to dst.
func AppendFrame(dst, doc []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(doc)))
	return append(dst, doc...)
}

// WriteFrame writes one frame in a single Write call, from a pooled buffer (w must not
// retain it, as io.Writer says); a document larger than the pool keeps goes out as two
// writes, the length prefix and then doc itself, rather than as a copy of it.
func WriteFrame(w io.Writer, doc []byte) error {
	if uint64(len(doc)) > 1<<32-1 {
		return ErrFrameTooLarge
	}
	if len(doc) > maxPooledBuffer {
		var h [FrameHeaderSize]byte
		binary.BigEndian.PutUint32(h[:], uint32(len(doc)))
		if _, err := w.Write(h[:]); err != nil {
			return err
		}
		_, err := w.Write(doc)
		return err
	}
	bp := getBuf()
	f := AppendFrame(*bp, doc)
	_, err := w.Write(f)
	putBuf(bp, f)
	return err
}

// frameChunk is how much ReadFrame allocates ahead of the bytes that have arrived: a peer that
// announces a large frame and then stalls costs at most this much, not the announced length.
const frameChunk = 64 << 10

// ReadFrame reads one frame whose body is at most max bytes (DefaultMaxMessageBytes when
// max <= 0): ReadFrameHeader, then ReadFrameBody. A clean end of stream before the header is
// io.EOF; one inside a frame (header included) is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	n, err := ReadFrameHeader(r, max)
	if err != nil {
		return nil, err
	}
	return ReadFrameBody(r, n)
}

// ReadFrameHeader reads a frame's length prefix and checks it against max
// (DefaultMaxMessageBytes when max <= 0) before anything is allocated, so that a caller can
// charge the length to a budget before it reads the body. A clean end of stream is io.EOF;
// an end inside the header is io.ErrUnexpectedEOF.
func ReadFrameHeader(r io.Reader, max int) (int, error) {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	var hdr [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("frame header: %w", err)
		}
		return 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return 0, ErrEmptyFrame
	}
	if uint64(n) > uint64(max) {
		return 0, fmt.Errorf("%w: %d bytes announced, limit %d", ErrFrameTooLarge, n, max)
	}
	return int(n), nil
}

// ReadFrameBody reads the size bytes of a frame's body. The buffer grows, doubling from
// 64 KiB, with the bytes that actually arrive: no buffer is larger than size, and a peer that
// announces a large frame and stalls does not get the whole size allocated. An end of stream
// before size bytes is io.ErrUnexpectedEOF.
func ReadFrameBody(r io.Reader, size int) ([]byte, error) {
	body := make([]byte, 0, min(size, frameChunk))
	for len(body) < size {
		if len(body) == cap(body) {
			grown := make([]byte, len(body), min(size, 2*cap(body)))
			copy(grown, body)
			body = grown
		}
		k, err := io.ReadFull(r, body[len(body):cap(body)])
		body = body[:len(body)+k]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}
