package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestFraming_RoundTrip(t *testing.T) {
	var buf bytes.Buffer
	docs := [][]byte{[]byte(`{"a":1}`), bytes.Repeat([]byte("x"), 200_000), []byte(`{}`)}
	for _, d := range docs {
		if err := protocol.WriteFrame(&buf, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := binary.BigEndian.Uint32(buf.Bytes()[:4]); got != 7 {
		t.Fatalf("length prefix = %d, want 7 (4-byte big-endian)", got)
	}
	// One byte at a time, to exercise every partial read.
	r := iotest.OneByteReader(&buf)
	for i, want := range docs {
		got, err := protocol.ReadFrame(r, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, %v", i, len(got), err)
		}
	}
	if _, err := protocol.ReadFrame(r, 1<<20); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	if got := protocol.AppendFrame([]byte("p"), []byte("ab")); !bytes.Equal(got, []byte("p\x00\x00\x00\x02ab")) {
		t.Fatalf("AppendFrame = %q", got)
	}
}

// allocated returns how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestFraming_LengthCheckedBeforeAllocation(t *testing.T) {
	hdr := []byte{0xff, 0xff, 0xff, 0xff} // 4 GiB - 1
	var err error
	n := allocated(func() { _, err = protocol.ReadFrame(bytes.NewReader(hdr), protocol.DefaultMaxMessageBytes) })
	if !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	if n > 64<<10 { // the error message and the reader; a body would be gigabytes
		t.Fatalf("refusing a 4 GiB frame allocated %d bytes", n)
	}
	// One byte over the limit is refused as well; at the limit is read.
	over := protocol.AppendFrame(nil, make([]byte, 101))
	if _, err := protocol.ReadFrame(bytes.NewReader(over), 100); !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Fatalf("101 bytes with limit 100: %v", err)
	}
	if _, err := protocol.ReadFrame(bytes.NewReader(over), 101); err != nil {
		t.Fatalf("101 bytes with limit 101: %v", err)
	}
	// A negative or zero limit means the default, never "no limit".
	if _, err := protocol.ReadFrame(bytes.NewReader(hdr), -1); !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Fatalf("limit -1: %v", err)
	}
}

// A peer that announces the largest allowed frame and sends a few bytes does not get the
// whole limit allocated.
func TestFraming_AllocationFollowsArrivingBytes(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, protocol.DefaultMaxMessageBytes)
	frame = append(frame, "only a little"...)
	var err error
	n := allocated(func() { _, err = protocol.ReadFrame(bytes.NewReader(frame), protocol.DefaultMaxMessageBytes) })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
	if n > 256<<10 {
		t.Fatalf("a stalled 16 MiB frame allocated %d bytes", n)
	}
}

func TestFraming_EmptyFrameIsRefused(t *testing.T) {
	if _, err := protocol.ReadFrame(bytes.NewReader([]byte{0, 0, 0, 0}), 100); !errors.Is(err, protocol.ErrEmptyFrame) {
		t.Fatalf("err = %v, want ErrEmptyFrame", err)
	}
}

func TestFraming_Truncated(t *testing.T) {
	full := protocol.AppendFrame(nil, []byte(`{"envelope":{}}`))
	for cut := 1; cut < len(full); cut++ {
		_, err := protocol.ReadFrame(bytes.NewReader(full[:cut]), 100)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: err = %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	if _, err := protocol.ReadFrame(bytes.NewReader(nil), 100); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
}

func TestFraming_ReaderErrorsPassThrough(t *testing.T) {
	boom := errors.New("boom")
	if _, err := protocol.ReadFrame(iotest.ErrReader(boom), 100); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// A large document is framed without a copy of it: the length prefix, then the document, in
// two writes that read back as one frame.
func TestWriteFrame_LargeDocumentIsNotCopied(t *testing.T) {
	doc := bytes.Repeat([]byte("a"), 8<<20)
	var buf bytes.Buffer
	buf.Grow(len(doc) + 16)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := protocol.WriteFrame(&buf, doc); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("framing an %d MiB document allocated %d KiB", len(doc)>>20, grew>>10)
	}
	got, err := protocol.ReadFrame(&buf, len(doc))
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(doc))
	}
}
