package testsupport

import "sync"

// Gauge counts what is under way (connections open, calls in progress) and the most that
// ever were at once. Its zero value is ready; it is safe for concurrent use.
type Gauge struct {
	mu        sync.Mutex
	now, most int
}

// Enter counts one more under way.
func (g *Gauge) Enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now++
	g.most = max(g.most, g.now)
}

// Leave counts one fewer under way.
func (g *Gauge) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now--
}

// Counts returns how many are under way now, and the most that ever were at once.
func (g *Gauge) Counts() (now, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now, g.most
}
