package discovery

import (
	"slices"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// subscribeAddrs subscribes to the host's address changes for the republish loop, which
// closes the subscription; nil if the host's event bus refuses (the record is then
// republished at half its TTL only).
func (d *Discovery) subscribeAddrs() event.Subscription {
	sub, err := d.h.EventBus().Subscribe(new(event.EvtLocalAddressesUpdated))
	if err != nil {
		d.log.Warn("address changes are not followed; the agent record is republished at half its TTL only", "err", err)
		return nil
	}
	return sub
}

// addrsChanged marks the published record stale, and reports it, when the addresses it
// carries are no longer the host's: a node that got a relay reservation, lost one, or moved to
// another network republishes at once, so that peers resolving its agent find where it is now.
func (d *Discovery) addrsChanged() bool {
	now := publicAddrs(d.h.Addrs())
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.local
	if l == nil || l.published.IsZero() || slices.EqualFunc(l.addrs, now, ma.Multiaddr.Equal) {
		return false
	}
	l.stale = true
	return true
}

// serving reports whether the DHT answers others now: its protocol is on the host, as it is
// in server mode and, in auto mode, while the node is not found private.
func (d *Discovery) serving() bool {
	kad := d.cfg.prefix + "/kad/1.0.0"
	return slices.ContainsFunc(d.h.Mux().Protocols(), func(p protocol.ID) bool { return string(p) == kad })
}
