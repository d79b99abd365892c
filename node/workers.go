package node

import (
	"sync"
	"sync/atomic"
)

// idleWorkers is how many handler goroutines stay parked after their message, waiting for the
// next one (see workers).
const idleWorkers = 8

// workers runs the Go handlers of inbound messages. A new goroutine starts with a small stack,
// and a handler's grows on its first message (building, canonicalising and signing the
// response goes deeper than the runtime's initial stack), copying the stack each time it
// doubles: with a goroutine per message, every request paid those copies, about 3 % of the
// CPU of a round trip (docs/node.md, "Speed"). A worker that finished its message stays parked,
// up to idleWorkers of them, and takes the next message on the stack it already grew (until
// the garbage collector shrinks a stack that sat idle). More run at once when more messages
// are in progress: the node's handler slots bound them, not this.
type workers struct {
	tasks chan func() // unbuffered: a send succeeds only into a parked worker
	idle  atomic.Int32
	done  <-chan struct{} // closed when the node stops: parked workers exit
	wg    *sync.WaitGroup // the node's, which Close waits for
}

func newWorkers(done <-chan struct{}, wg *sync.WaitGroup) *workers {
	return &workers{tasks: make(chan func()), done: done, wg: wg}
}

// run runs f on a parked worker, or on a new one when none is parked. The caller holds a
// reservation that Close drains (an in-flight exchange) while f runs, so that no worker
// starts after Close waited for them.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
		return
	default:
	}
	w.wg.Add(1)
	go w.work(f)
}

func (w *workers) work(f func()) {
	defer w.wg.Done()
	for {
		f()
		if w.idle.Add(1) > idleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.tasks:
			w.idle.Add(-1)
		case <-w.done:
			w.idle.Add(-1)
			return
		}
	}
}
