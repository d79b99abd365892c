package workers

import (
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// Tasks run one after another run on a parked worker, not on a goroutine each. (A task given
// in the instant its predecessor's worker counts itself parked but is not yet waiting starts a
// worker of its own, so the test allows a few.)
func TestPool_TasksInTurnReuseAParkedWorker(t *testing.T) {
	var wg sync.WaitGroup
	p := New(4, &wg)
	for range 100 {
		ran := make(chan struct{})
		p.Go(func() { close(ran) })
		<-ran
		testsupport.WaitFor(t, 5*time.Second, "a worker parked", func() bool { return p.Parked() >= 1 })
		time.Sleep(100 * time.Microsecond) // and waiting
	}
	if n := p.started.Load(); n > 10 {
		t.Fatalf("100 tasks in turn started %d workers, want one or a few", n)
	}
	p.Close()
	wg.Wait()
}

// Tasks in progress at once each get a worker, however many are parked; at most the bound
// stay parked afterwards, and all of them exit on Close.
func TestPool_ConcurrentTasksRunAtOnceAndFewStayParked(t *testing.T) {
	var wg sync.WaitGroup
	const idle, n = 4, 12
	p := New(idle, &wg)
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait() // every task runs although none has finished
	close(release)
	testsupport.WaitFor(t, 5*time.Second, "the bound of workers parked", func() bool { return p.Parked() == idle })
	time.Sleep(20 * time.Millisecond)
	if got := p.Parked(); got != idle {
		t.Fatalf("%d workers parked after %d tasks, want %d", got, n, idle)
	}
	p.Close()
	wg.Wait() // returns only once every worker exited; TestMain checks that none is left
}
