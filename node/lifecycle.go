package node

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/network"
)

// lifecycle is the gate Close shuts: the exchanges in flight (inbound streams, handlers, the
// trust protocols' requests), which Close drains, and the background goroutines spawned on
// the node's wait group, which it waits for. gate orders inflight.Add and wg.Add against
// Close; closing and stopped are guarded by it.
type lifecycle struct {
	wg       *sync.WaitGroup // the node's: background loops and session readers
	inflight sync.WaitGroup  // inbound streams and handlers, drained on Close
	gate     sync.RWMutex
	closing  bool // no new exchanges
	stopped  bool // no new background goroutines
}

// beginClose refuses new exchanges from now on.
func (l *lifecycle) beginClose() {
	l.gate.Lock()
	l.closing = true
	l.gate.Unlock()
}

// stop refuses new background goroutines from now on.
func (l *lifecycle) stop() {
	l.gate.Lock()
	l.stopped = true
	l.gate.Unlock()
}

// track counts one in-flight exchange, or returns false once Close has begun; a true is
// matched by done.
func (l *lifecycle) track() bool {
	l.gate.RLock()
	defer l.gate.RUnlock()
	if l.closing {
		return false
	}
	l.inflight.Add(1)
	return true
}

// done ends an exchange track counted.
func (l *lifecycle) done() { l.inflight.Done() }

// tracked wraps the handler of a request/answer protocol (trust's certificate, join and
// authority protocols) so that it counts as an exchange in flight, as the IACP protocol's
// streams do: Close waits for it (a join that marked its invitation used gets to send the
// certificate), and a stream that arrives once Close has begun is reset.
func (l *lifecycle) tracked(h network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) {
		if !l.track() {
			s.Reset()
			return
		}
		defer l.done()
		h(s)
	}
}

// spawn runs f on a goroutine that Close waits for, unless Close has got past its drain;
// then it returns false and f does not run.
func (l *lifecycle) spawn(f func()) bool {
	l.gate.RLock()
	defer l.gate.RUnlock()
	if l.stopped {
		return false
	}
	l.wg.Go(f)
	return true
}

// isClosing reports whether Close has begun.
func (l *lifecycle) isClosing() bool {
	l.gate.RLock()
	defer l.gate.RUnlock()
	return l.closing
}
