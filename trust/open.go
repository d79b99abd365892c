package trust

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"
)

// openChecker is the rules of the open modes: trust on first use, or the allowlist's pairs
// (trustStore decides both). Nothing is fetched; a recipient is never refused.
type openChecker struct{ store *trustStore }

func (o openChecker) mode() string {
	if o.store.allowlist != nil {
		return Allowlist
	}
	return Open
}

func (o openChecker) claim(_ context.Context, agentID string, p peer.ID, source string) error {
	return o.store.check(agentID, p, source)
}

func (openChecker) recipient(context.Context, string, peer.ID) error { return nil }

func (o openChecker) bind(agentID string, p peer.ID) { o.store.pin(agentID, p) }

func (o openChecker) peerOf(agentID string) (peer.ID, bool) { return o.store.peerOf(agentID) }

// heard: a heartbeat refreshes where an agent is only when its id is already bound to the
// heartbeat's author; one of another peer is recorded as a conflict.
func (o openChecker) heard(agentID string, p peer.ID) (bool, error) {
	if err := o.store.check(agentID, p, SourceHeartbeat); err != nil {
		return false, err
	}
	return o.store.pinnedTo(agentID, p), nil
}

func (openChecker) grants(peer.ID) []string { return nil }
