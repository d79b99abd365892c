package store

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reader Open, Check and Recover use survives any damage: 200 copies of a small store
// file, each with up to 64 random bytes written at a random place, are checked and salvaged
// without a panic (the check turns one into a "the check itself failed" problem), and
// without reading outside the bytes. The pseudo-random sequence is fixed, so a failure
// repeats.
func TestReaderSurvivesRandomDamage(t *testing.T) {
	f := newFixture(t, 40)
	good, err := os.ReadFile(filepath.Join(f.dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 13))
	bodyDir := t.TempDir() // no message files: a record naming one is not sound
	for i := range 200 {
		data := append([]byte(nil), good...)
		at, n := r.IntN(len(data)), 1+r.IntN(64)
		for j := 0; j < n && at+j < len(data); j++ {
			data[at+j] = byte(r.Uint32())
		}
		rc := newRecordCheck()
		for _, p := range verifyFile(data, rc.visit) {
			if strings.Contains(p.What, "the check itself failed") {
				t.Fatalf("damage %d (%d bytes at %d): the reader panicked: %s", i, n, at, p.What)
			}
		}
		_ = salvageFile(data, bodyDir)
	}
}
