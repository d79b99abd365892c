package node

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Messages handled one after another run on one worker, not on a goroutine each.
func TestWorkers_SequentialMessagesReuseAParkedWorker(t *testing.T) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	w := newWorkers(done, &wg)
	before := runtime.NumGoroutine()
	for range 100 {
		ran := make(chan struct{})
		w.run(func() { close(ran) })
		<-ran
		waitFor(t, func() bool { return w.idle.Load() == 1 }) // parked again
	}
	if n := runtime.NumGoroutine() - before; n != 1 {
		t.Fatalf("100 messages in turn left %d goroutines, want the one parked worker", n)
	}
	close(done)
	wg.Wait()
}

// Messages in progress at once each get a worker, however many are parked, and at most
// idleWorkers stay parked afterwards; all of them exit when the node stops.
func TestWorkers_ConcurrentMessagesRunAtOnceAndFewStayParked(t *testing.T) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	w := newWorkers(done, &wg)
	const n = 3 * idleWorkers
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		w.run(func() { started.Done(); <-release })
	}
	started.Wait() // every message runs although none has finished
	close(release)
	waitFor(t, func() bool { return w.idle.Load() == idleWorkers })
	time.Sleep(20 * time.Millisecond)
	if got := w.idle.Load(); got != idleWorkers {
		t.Fatalf("%d workers parked after %d messages, want %d", got, n, idleWorkers)
	}
	close(done)
	wg.Wait() // returns only once every worker exited
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
