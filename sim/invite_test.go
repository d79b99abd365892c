package sim

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
)

// A join by invitation whose authority does not answer is asked again until joinTimeout
// (minutes, for a saturated machine), but a cancelled run does not wait for that: the join
// gives up when the run's context ends.
func TestRedeem_GivesUpWhenTheRunIsCancelled(t *testing.T) {
	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	authKey, authPub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	authID, err := peer.IDFromPrivateKey(authKey)
	if err != nil {
		t.Fatal(err)
	}
	// Port 1 on loopback: nobody listens, every dial is refused at once.
	inv := authority.Invite{Addrs: []string{"/ip4/127.0.0.1/tcp/1/p2p/" + authID.String()}, AuthorityKey: authPub,
		Secret: make([]byte, authority.InviteSecretSize), AgentID: "sim:test:joiner", Expires: time.Now().Add(time.Hour)}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel) // after the first attempt and a retry
	_, err = redeemLoopback(ctx, "node 1", sk, inv, "sim:test:joiner", nil)
	if err == nil || !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("redeem: %v (run context: %v), want it to give up once the run was cancelled", err, ctx.Err())
	}
}
