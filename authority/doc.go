// Package authority is the mesh authority of a closed IACP mesh: one Ed25519 key that signs
// agent certificates, certificate revocation lists and A2ACP authorization tokens, and the
// invitations with which new agents join. It does no networking and reads no clock it was not
// given; node code calls it.
//
// # Trust model
//
// A mesh is named by its authority: the mesh id is the libp2p peer id of the authority's
// public key (peer.IDFromPublicKey), so it is compact and self-certifying, and a node that
// knows the id knows the key. The authority certifies that an agent id belongs to a libp2p
// peer key: a certificate is a compact JWT (alg EdDSA, typ "iacp-cert+jwt") whose "sub" is the
// agent id and whose RFC 7800 "cnf" claim holds the peer's Ed25519 public key, so a
// certificate is useless to anyone who does not hold that peer's private key, which the peer
// proves by signing its libp2p handshake and its IACP messages. A Verifier holds only the
// mesh public key; it accepts a certificate when the authority signed it, it is within its
// validity (with 30 s of clock skew), it names the expected agent and peer, and its jti is not
// on the highest-numbered revocation list it has applied. Revocation lists are signed JWTs
// (typ "iacp-crl+jwt") with a sequence number; a verifier keeps the highest, so an old list
// replayed by anyone cannot undo a revocation. A2ACP tokens (typ "JWT", the claims of the
// A2ACP draft) are checked with the draft's five rules; besides the mesh authority, an
// operator may trust further token issuers by name and key, for tokens only, never for
// certificates.
//
// # Invitations
//
// An invitation (Invite, "iacp-invite-v1." and base64url JSON) carries bootstrap addresses,
// the mesh id and a 32-byte random secret. The joiner never sends the secret: it sends
// InviteID(secret), the base64url SHA-256 of the secret, to name the invitation, and
// Proof(secret, peer, agent), an HMAC-SHA256 keyed by the secret over its peer id and agent
// id, so that a join message observed on the wire cannot be replayed for another peer or
// agent. To check that HMAC the authority needs the secret itself, so the InviteBook stores
// each secret, beside its id, in a file of mode 0600 on the authority's node, as private as
// the authority key: whoever can read either can admit agents. An invitation is redeemed at
// most once, and it is marked used on disk before the redemption succeeds.
package authority
