package node

import "time"

// lazyDeadline keeps one direction's deadline of a stream (read or write) and sets it only
// when it must move: earlier, or later by an eighth of its timeout or more. A stream's reads
// and writes each set a deadline, and on a yamux stream every SetReadDeadline or
// SetWriteDeadline stops a timer and starts another (time.AfterFunc); on a busy stream most
// frames now cost none. Each read or write still has at least seven eighths of its timeout.
// A lazyDeadline is used by one goroutine at a time (its owner's lock).
type lazyDeadline struct {
	at  time.Time
	set func(time.Time) error
}

// extend makes the deadline now + timeout, give or take an eighth of timeout.
func (d *lazyDeadline) extend(now time.Time, timeout time.Duration) {
	want := now.Add(timeout)
	if !d.at.After(want) && want.Sub(d.at) < timeout/8 {
		return
	}
	if d.set(want) == nil {
		d.at = want
	}
}
