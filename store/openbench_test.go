package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkOpenCheck measures what Open costs on a full store: the check of every page and
// record before bbolt reads the file, which also adds up the byte counters (verify), bbolt's
// open and tx.Check (boltcheck), then a whole Open (open). The 1 GiB case writes a 1 GiB file and runs
// only with IACP_STORE_BENCH_BIG=1. The page cache is warm: a cold disk adds its read time.
func BenchmarkOpenCheck(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		size int
		big  bool
	}{
		{"100k_x_1KiB", 100_000, 1024 - 300, false},
		{"1GiB_x_64KiB", 16_384, 64<<10 - 300, true},
		{"1GiB_x_1KiB", 1 << 20, 1024 - 300, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.big && os.Getenv("IACP_STORE_BENCH_BIG") == "" {
				b.Skip("set IACP_STORE_BENCH_BIG=1 to write a 1 GiB store")
			}
			dir := b.TempDir()
			fillOutbox(b, dir, c.n, c.size)
			path := filepath.Join(dir, FileName)
			var verify, check, whole time.Duration
			for b.Loop() {
				start := time.Now()
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				fi, _ := f.Stat()
				data, unmap, err := mapFile(f, fi.Size())
				if err != nil {
					b.Fatal(err)
				}
				rc := newRecordCheck()
				if p := verifyFile(data, rc.visit); len(p)+len(rc.problems) > 0 {
					b.Fatal(p, rc.problems)
				}
				unmap()
				_ = f.Close()
				verify += time.Since(start)

				start = time.Now()
				db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
				if err != nil {
					b.Fatal(err)
				}
				if p := boltCheckDB(db); len(p) > 0 {
					b.Fatal(p)
				}
				check += time.Since(start)
				_ = db.Close()

				start = time.Now()
				st, err := Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				whole += time.Since(start)
				_ = st.Close()
			}
			fi, _ := os.Stat(path)
			n := float64(b.N)
			b.ReportMetric(float64(fi.Size())/(1<<20), "file_MiB")
			b.ReportMetric(verify.Seconds()*1000/n, "verify_ms")
			b.ReportMetric(check.Seconds()*1000/n, "boltcheck_ms")
			b.ReportMetric(whole.Seconds()*1000/n, "open_ms")
		})
	}
}

// fillOutbox writes n outbox messages of about size payload bytes, 10,000 per commit.
func fillOutbox(b *testing.B, dir string, n, size int) {
	b.Helper()
	s, err := Open(dir, WithNoSync(true), WithMaxTotalBytes(1<<40), WithMaxRecipientBytes(1<<40))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m, raw := msg(b, "a:h:r", time.Now(), 3600, size)
	for done := 0; done < n; {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i := 0; i < 10_000 && done < n; i, done = i+1, done+1 {
				id := fmt.Sprintf("%08x-0000-7000-8000-%012x", done, done)
				seq, _ := tx.Bucket(bktOutbox).NextSequence()
				e := OutboxEntry{MessageID: id, Recipient: fmt.Sprintf("a:h:r%d", done%64), Raw: raw, Seq: seq,
					EnqueuedAt: time.Now(), ExpiresAt: m.Expires(), NextAttemptAt: time.Now()}
				if err := putOutbox(tx, &e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
