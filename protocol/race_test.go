//go:build race

package protocol_test

// raceEnabled: the race detector drops sync.Pool items at random, so allocation counts
// that rely on a pool do not hold under it.
const raceEnabled = true
