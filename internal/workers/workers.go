// Package workers runs short tasks on goroutines that outlive one task. A new goroutine starts
// with a small stack and grows it, copying it each time it doubles, when its task goes deep:
// building, canonicalising and signing a message does. The node ran each inbound message's Go
// handler on a goroutine of its own and paid those copies on every request, about 3 % of the
// CPU of a round trip (docs/journal/node.md, "Speed"). A worker that finished its task stays parked, up
// to a bound, and takes the next one on the stack it already grew. It imports nothing of this
// module, so that any package can use it.
package workers

import (
	"sync"
	"sync/atomic"
)

// Pool runs tasks on workers. Tasks never wait for one another: a task that finds no parked
// worker gets a new one, so whatever bounds the owner's concurrency bounds the workers too.
// Every worker is counted in the owner's WaitGroup; Close makes the parked ones exit.
type Pool struct {
	tasks   chan func() // unbuffered: a send succeeds only into a parked worker; closed by Close
	idle    atomic.Int32
	maxIdle int32
	wg      *sync.WaitGroup
	started atomic.Int64 // workers started, for tests
}

// New returns a pool that keeps at most idle workers parked and counts its workers in wg.
func New(idle int, wg *sync.WaitGroup) *Pool {
	return &Pool{tasks: make(chan func()), maxIdle: int32(idle), wg: wg}
}

// Go runs f on a parked worker, or on a new one when none is parked. The owner orders every Go
// before its Close and its wait on wg, as for wg.Add.
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

// Close makes the parked workers exit, and those still running exit after their task. Call it
// once, after the last Go; then wait on the WaitGroup given to New.
func (p *Pool) Close() { close(p.tasks) }

// work runs f, then parks and runs what it is given until Close, unless idle workers are
// already parked. A worker counts itself parked just before it waits, so a Go in that
// instant starts a new worker: one goroutine more, never a task that waits. A parked worker
// waits on the task channel alone, which Close closes: a select over a second channel would
// lock both on every task.
func (p *Pool) work(f func()) {
	defer p.wg.Done()
	for ok := true; ok; {
		f()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		f, ok = <-p.tasks
		p.idle.Add(-1)
	}
}

// Parked returns how many workers are parked now.
func (p *Pool) Parked() int { return int(p.idle.Load()) }
