package pubsub

import (
	"context"
	"testing"

	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
)

// fakeSource records what gossip asked of its peer source.
type fakeSource struct {
	groups []string
	limits []int
}

func (f *fakeSource) Neighbours(limit int) []peer.AddrInfo {
	f.limits = append(f.limits, limit)
	return []peer.AddrInfo{{ID: "n1"}, {ID: "n2"}}
}

func (f *fakeSource) CapabilityPeers(_ context.Context, cp string, limit int) ([]peer.AddrInfo, error) {
	f.groups = append(f.groups, cp)
	f.limits = append(f.limits, limit)
	return []peer.AddrInfo{{ID: "g1"}}, nil
}

// gossipsub asks for peers under "floodsub:<topic>": a group topic is answered with the
// capability's providers, any other topic with neighbours; nothing is ever advertised.
func TestPeerSourceDiscovery(t *testing.T) {
	src := &fakeSource{}
	d := sourceDiscovery{prefix: DefaultTopicPrefix, src: src}
	ctx := context.Background()
	if ttl, err := d.Advertise(ctx, "floodsub:"+DefaultTopicPrefix+heartbeatName); err != nil || ttl <= 0 {
		t.Fatalf("advertise: %s, %v", ttl, err)
	}
	collect := func(ns string, opts ...discovery.Option) []peer.ID {
		ch, err := d.FindPeers(ctx, ns, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var ids []peer.ID
		for ai := range ch {
			ids = append(ids, ai.ID)
		}
		return ids
	}
	if got := collect("floodsub:" + DefaultTopicPrefix + groupName + "code.review"); len(got) != 1 || got[0] != "g1" {
		t.Fatalf("group topic: %v", got)
	}
	if len(src.groups) != 1 || src.groups[0] != "code.review" {
		t.Fatalf("asked for groups %v, want [code.review]", src.groups)
	}
	if got := collect("floodsub:"+DefaultTopicPrefix+heartbeatName, discovery.Limit(5)); len(got) != 2 {
		t.Fatalf("heartbeat topic: %v", got)
	}
	if want := []int{peerSourceLimit, 5}; len(src.limits) != 2 || src.limits[0] != want[0] || src.limits[1] != want[1] {
		t.Fatalf("limits %v, want %v", src.limits, want)
	}
}
