package mocknet

import "sync"

// chunkSize is the size of the pieces a direction of a stream holds its unread bytes in.
const chunkSize = 4 << 10

type chunk [chunkSize]byte

// chunkPool holds the chunks no direction uses: most of a mesh's streams are idle most of the
// time, and a direction holds chunks only while it has unread bytes.
var chunkPool = sync.Pool{New: func() any { return new(chunk) }}

// queue is a FIFO of bytes held in chunks from chunkPool. Writing never moves or copies what
// it holds, and each chunk goes back to the pool as soon as it was read. (One growing buffer
// per direction, as before 2026-11-28, allocated a buffer twice as large and copied the
// backlog into it each time a slow reader let writes pile up: 27 % of all the bytes a
// 500-node join allocated.) Its user serialises its methods.
type queue struct {
	chunks []*chunk // chunks[first:] hold the bytes
	first  int
	head   int // where the bytes start in chunks[first]
	tail   int // where they end in the last chunk
	n      int // how many it holds
}

// Len is how many bytes q holds.
func (q *queue) Len() int { return q.n }

// write appends a copy of p.
func (q *queue) write(p []byte) {
	for len(p) > 0 {
		if len(q.chunks) == q.first || q.tail == chunkSize {
			if len(q.chunks) == cap(q.chunks) && q.first > 0 {
				live := copy(q.chunks, q.chunks[q.first:])
				clear(q.chunks[live:])
				q.chunks, q.first = q.chunks[:live], 0
			}
			q.chunks = append(q.chunks, chunkPool.Get().(*chunk))
			q.tail = 0
		}
		k := copy(q.chunks[len(q.chunks)-1][q.tail:], p)
		q.tail += k
		q.n += k
		p = p[k:]
	}
}

// read moves the first len(b) bytes of q, or all it holds if fewer, into b and returns how
// many it moved.
func (q *queue) read(b []byte) int {
	moved := 0
	for moved < len(b) && q.n > 0 {
		c := q.chunks[q.first]
		end := chunkSize
		if q.first == len(q.chunks)-1 {
			end = q.tail
		}
		k := copy(b[moved:], c[q.head:end])
		q.head += k
		q.n -= k
		moved += k
		if q.n == 0 {
			q.free()
		} else if q.head == end {
			chunkPool.Put(c)
			q.chunks[q.first] = nil
			q.first++
			q.head = 0
		}
	}
	return moved
}

// free drops what q holds and gives its chunks back to the pool.
func (q *queue) free() {
	for i := q.first; i < len(q.chunks); i++ {
		chunkPool.Put(q.chunks[i])
	}
	clear(q.chunks)
	q.chunks = q.chunks[:0]
	if cap(q.chunks) > 4 {
		q.chunks = nil // an idle direction keeps a few pointers at most
	}
	q.first, q.head, q.tail, q.n = 0, 0, 0, 0
}
