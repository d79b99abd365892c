package mocknet

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The queue is a FIFO: whatever the sizes of the writes and of the reads, what is read is what
// was written, in order, and once everything was read it holds no chunk.
func TestQueue_ReadsWhatWasWrittenInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var want, got []byte
	for round := range 2000 {
		if rng.IntN(2) == 0 {
			p := make([]byte, rng.IntN(3*chunkSize))
			for i := range p {
				p[i] = byte(round + i)
			}
			q.write(p)
			want = append(want, p...)
		} else {
			b := make([]byte, rng.IntN(2*chunkSize))
			n := q.read(b)
			if n != min(len(b), len(want)-len(got)) {
				t.Fatalf("round %d: read %d of %d asked with %d held", round, n, len(b), len(want)-len(got))
			}
			got = append(got, b[:n]...)
		}
		if q.Len() != len(want)-len(got) {
			t.Fatalf("round %d: Len %d, want %d", round, q.Len(), len(want)-len(got))
		}
		if held := (len(q.chunks) - q.first) * chunkSize; held < q.Len() || held >= q.Len()+2*chunkSize {
			t.Fatalf("round %d: %d bytes in %d chunks", round, q.Len(), len(q.chunks)-q.first)
		}
	}
	rest := make([]byte, q.Len())
	got = append(got, rest[:q.read(rest)]...)
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read are not the bytes written")
	}
	if q.Len() != 0 || len(q.chunks) != 0 {
		t.Fatalf("an emptied queue holds %d bytes in %d chunks", q.Len(), len(q.chunks))
	}
}

// Writes to a queue that is never emptied reuse the room its read chunks leave: the slice of
// chunks does not grow with the bytes that passed through.
func TestQueue_AQueueNeverEmptyKeepsFewChunks(t *testing.T) {
	var q queue
	p := make([]byte, chunkSize/3)
	b := make([]byte, chunkSize/3)
	q.write(p)
	for range 10_000 {
		q.write(p)
		q.read(b)
	}
	if cap(q.chunks) > 8 {
		t.Fatalf("after 10,000 writes and reads with at most two chunks held, the slice of chunks has room for %d", cap(q.chunks))
	}
}

// BenchmarkStream_Backlog writes 64 gossip-sized messages (1.3 KB) before the reader reads
// them, as a saturated process's readers do: the bytes and allocations per message are what
// the stream's buffering costs.
func BenchmarkStream_Backlog(b *testing.B) {
	w, r := pair(b, LinkOptions{})
	msg := make([]byte, 1300)
	buf := make([]byte, 4096)
	b.SetBytes(int64(64 * len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		for range 64 {
			if _, err := w.Write(msg); err != nil {
				b.Fatal(err)
			}
		}
		for left := 64 * len(msg); left > 0; {
			n, err := r.Read(buf[:min(len(buf), left)])
			if err != nil {
				b.Fatal(err)
			}
			left -= n
		}
	}
}
