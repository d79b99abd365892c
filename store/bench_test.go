package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// benchWriters is how many goroutines put at once: a node with many agents sending.
const benchWriters = 64

// benchMessages pre-builds n messages of about 1 KiB for 16 recipients, so that the timed
// part measures the store and not JSON encoding.
func benchMessages(b *testing.B, n int) ([]*protocol.Message, [][]byte) {
	b.Helper()
	ms, raws := make([]*protocol.Message, n), make([][]byte, n)
	for i := range n {
		ms[i], raws[i] = msg(b, fmt.Sprintf("a:h:r%d", i%16), time.Now(), 3600, 1024-300)
	}
	return ms, raws
}

// putAll puts every message from benchWriters goroutines and returns the elapsed time.
func putAll(b *testing.B, s *Store, ms []*protocol.Message, raws [][]byte) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range benchWriters {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(ms)); i = next.Add(1) - 1 {
				if err := s.Put(ms[i], raws[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkPut measures outbox Puts of 1 KiB messages from 64 concurrent writers, with
// durability on (fsync per batched commit) and off (WithNoSync), in one run, and reports
// messages per second for each and their ratio (the goal is durable >= 0.5 x non-durable).
// Each iteration puts 2,000 messages into a fresh store in each mode.
func BenchmarkPut(b *testing.B) {
	const perIter = 2000
	var durable, nosync time.Duration
	var n int
	for b.Loop() {
		for _, mode := range []struct {
			noSync bool
			total  *time.Duration
		}{{false, &durable}, {true, &nosync}} {
			b.StopTimer()
			ms, raws := benchMessages(b, perIter)
			s, err := Open(b.TempDir(), WithNoSync(mode.noSync))
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			*mode.total += putAll(b, s, ms, raws)
			b.StopTimer()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		n += perIter
	}
	d := float64(n) / durable.Seconds()
	ns := float64(n) / nosync.Seconds()
	b.ReportMetric(d, "durable_msgs/s")
	b.ReportMetric(ns, "nosync_msgs/s")
	b.ReportMetric(d/ns, "durable/nosync")
}

// BenchmarkAccept measures durable inbox Accepts of 1 KiB messages from 64 concurrent
// writers: one transaction checks the seen set and stores the message.
func BenchmarkAccept(b *testing.B) {
	const perIter = 2000
	var total time.Duration
	var n int
	for b.Loop() {
		b.StopTimer()
		ms, raws := benchMessages(b, perIter)
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		b.StartTimer()
		start := time.Now()
		for range benchWriters {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < perIter; i = next.Add(1) - 1 {
					if _, err := s.Accept(ms[i], raws[i]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		total += time.Since(start)
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		n += perIter
	}
	b.ReportMetric(float64(n)/total.Seconds(), "msgs/s")
}
