// Package workers runs short tasks on goroutines that outlive one task. A new goroutine starts
// with a small stack and grows it, copying it each time it doubles, when its task goes deep:
// building, canonicalising and signing a message does. The node ran each inbound message's Go
// handler on a goroutine of its own and paid those copies on every request, about 3 % of the
// CPU of a round trip (docs/node.md, "Speed"). A worker that finished its task stays parked, up
// to a bound, and takes the next one on the stack it already grew. It imports nothing of this
// module, so that any package can use it.
package workers

import (
	"sync"
	"sync/atomic"
)

// Pool runs tasks on workers. Tasks never wait for one another: a task that finds no parked
// worker gets a new one, so whatever bounds the owner's concurrency bounds the workers too.
// Parked workers exit when done is closed; every worker is counted in the owner's WaitGroup,
// so the owner's wait after closing done returns once they all have.
type Pool struct {
	tasks   chan func() // unbuffered: a send succeeds only into a parked worker
	idle    atomic.Int32
	maxIdle int32
	started atomic.Int64 // workers started, for tests
	done    <-chan struct{}
	wg      *sync.WaitGroup
}

// New returns a pool that keeps at most idle workers parked, which exit when done is closed,
// and counts its workers in wg.
func New(idle int, done <-chan struct{}, wg *sync.WaitGroup) *Pool {
	return &Pool{tasks: make(chan func()), maxIdle: int32(idle), done: done, wg: wg}
}

// Go runs f on a parked worker, or on a new one when none is parked. The caller orders Go
// before its own wait on wg, as for wg.Add: a Go that may start a worker must not race the
// owner's Close.
func (p *Pool) Go(f func()) {
	select {
	case p.tasks <- f:
		return
	default:
	}
	p.wg.Add(1)
	p.started.Add(1)
	go p.work(f)
}

// work runs f, then parks and runs what it is given until done, unless idle workers are
// already parked. A worker counts itself parked just before it waits, so a Go in that
// instant starts a new worker: one goroutine more, never a task that waits.
func (p *Pool) work(f func()) {
	defer p.wg.Done()
	for {
		f()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.tasks:
			p.idle.Add(-1)
		case <-p.done:
			p.idle.Add(-1)
			return
		}
	}
}

// Parked returns how many workers are parked now.
func (p *Pool) Parked() int { return int(p.idle.Load()) }
