package cli_test

import (
	"bytes"
	"sync"
)

var bufMu sync.Mutex

// lockedBuf is a buffer written by one goroutine and read by another.
type lockedBuf struct{ b *bytes.Buffer }

func (l *lockedBuf) Write(p []byte) (int, error) {
	bufMu.Lock()
	defer bufMu.Unlock()
	return l.b.Write(p)
}

func readLocked(b *bytes.Buffer) string {
	bufMu.Lock()
	defer bufMu.Unlock()
	return b.String()
}
