package discovery

import (
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p-kad-dht/records"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ownerOf reads keys and values a remote peer chose (through kad-dht): whatever they hold, it
// names an owner without panicking, and the provider named in a provider key is that owner.
func FuzzOwnerOf(f *testing.F) {
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		f.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(records.ProvidersKeyPrefix+"CIQA/"+providerPeerEncoding.EncodeToString([]byte(id)), []byte{2})
	f.Add("/iacp-agent/X", envelopeBytes(`{"record":{"peer_id":"`+id.String()+`","expires_unix_ms":1}}`))
	f.Add("/iacp-peer/X", envelopeBytes(`{"record":{"peer_id":"x","expires_unix_ms":-5}}`))
	f.Add(records.ProvidersKeyPrefix, []byte(nil))
	f.Add("/providers/a/b/c", []byte("\xff"))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		owner, expires := ownerOf(key, value)
		if expires < 0 {
			t.Fatalf("negative expiry %d", expires)
		}
		if rest, ok := strings.CutPrefix(key, records.ProvidersKeyPrefix); ok && owner != "" {
			raw, err := providerPeerEncoding.DecodeString(rest[strings.LastIndexByte(rest, '/')+1:])
			if err != nil || peer.ID(raw) != owner {
				t.Fatalf("provider key %q charged to %s", key, owner)
			}
		}
	})
}
