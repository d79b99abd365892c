package protocol

import "sync"

// maxPooledBuffer is the largest buffer returned to bufPool: one that grew beyond it (a
// large document) is left to the garbage collector rather than kept for small ones.
const maxPooledBuffer = 64 << 10

// bufPool holds the scratch buffers of the bytes that are used and dropped at once: the
// canonical form Digest hashes, the frame WriteFrame hands to the stream (a Writer must
// not retain what it is given). Signing, verifying and framing a document then allocate
// nothing for them, and the garbage collector runs less often on a busy node.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// getBuf returns an empty scratch buffer; give it back with putBuf once nothing refers to it.
func getBuf() *[]byte {
	bp := bufPool.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

// putBuf keeps b, the buffer last grown from bp, for the next getBuf.
func putBuf(bp *[]byte, b []byte) {
	if cap(b) > maxPooledBuffer {
		return
	}
	*bp = b[:0]
	bufPool.Put(bp)
}
