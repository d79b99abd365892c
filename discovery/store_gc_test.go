package discovery

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p-kad-dht/records"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
)

// kad-dht's own garbage collectors run over the bounded store: the value store's sweep drops
// a record older than its MaxRecordAge and the provider manager's sweep drops a provider
// record older than its ProvideValidity, both through the store's Query and Delete. kad-dht
// reads the clock itself, so the test runs in a synctest bubble, where time is simulated.
func TestKadDHTGarbageCollectsThroughTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxAge = time.Hour
		sk, self := testKey(t)
		s := newBoundedStore(self, time.Now, 1000, DefaultMaxStoredBytes, 100)
		vs := records.NewValueStore(s, record.NamespacedValidator{
			AgentNamespace: Validator{Namespace: AgentNamespace},
		}, maxAge)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		vs.StartGC(ctx, 10*time.Minute)
		ps, err := pstoremem.NewPeerstore()
		if err != nil {
			t.Fatal(err)
		}
		pm, err := records.NewProviderManager(self, ps, s, records.Cache(noProviderCache{}),
			records.CleanupInterval(10*time.Minute), records.ProvideValidity(maxAge))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ps.Close() }()
		defer func() { _ = vs.Close() }()
		defer func() { _ = pm.Close() }()

		// the record itself lives 23 h: the store's own expiry does not drop it first.
		_, other := testKey(t)
		rec := testRecord(self, 1, time.Now().Add(23*time.Hour))
		rec.AgentID, rec.Manifest = agentID(7), manifestFor(7)
		if err := vs.Put(ctx, AgentKey(agentID(7)), record.MakePutRecord(AgentKey(agentID(7)), mustSign(t, rec, sk))); err != nil {
			t.Fatal(err)
		}
		if err := pm.AddProvider(ctx, capKey(t, 1), peer.AddrInfo{ID: other}); err != nil {
			t.Fatal(err)
		}

		time.Sleep(maxAge - time.Minute)
		synctest.Wait()
		if st := s.Stats(); st.Entries != 2 {
			t.Fatalf("before the age limit: %+v, want both records", st)
		}
		time.Sleep(15 * time.Minute) // past the age limit, and a sweep of each
		synctest.Wait()
		if st := s.Stats(); st.Entries != 0 || st.Expired != 0 || st.Owners != 0 {
			t.Fatalf("after the sweeps: %+v; kad-dht's collectors must have deleted both", st)
		}
	})
}
