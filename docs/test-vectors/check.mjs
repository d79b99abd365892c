// check.mjs verifies the IACP test vectors with node.js and its standard library only: an
// RFC 8785 canonicaliser in a few lines (JSON.stringify already prints numbers and strings the
// way RFC 8785 requires; only object member order has to be imposed), SHA-256 and Ed25519 from
// node:crypto, and base58btc decoding of the peer id.
//
// Usage: node check.mjs [DIR]   (DIR defaults to this file's directory)
import { readFileSync } from "node:fs";
import { createHash, createPublicKey, verify } from "node:crypto";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const dir = process.argv[2] ?? dirname(fileURLToPath(import.meta.url));

// RFC 8785: members sorted by UTF-16 code units (what Array.prototype.sort does to strings),
// values printed by JSON.stringify (ECMAScript number and string serialisation).
function canonical(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
function base58btc(s) {
  let n = 0n;
  for (const c of s) {
    const d = ALPHABET.indexOf(c);
    if (d < 0) throw new Error("not base58btc: " + s);
    n = n * 58n + BigInt(d);
  }
  const bytes = [];
  while (n > 0n) { bytes.unshift(Number(n % 256n)); n /= 256n; }
  for (const c of s) { if (c !== "1") break; bytes.unshift(0); }
  return Buffer.from(bytes);
}

// A peer id of an Ed25519 key: identity multihash (0x00, length 0x24) of the libp2p
// PublicKey protobuf (0x08 0x01 = Type Ed25519, 0x12 0x20 = 32 bytes of Data).
function ed25519KeyOfPeerID(id) {
  const mh = base58btc(id);
  const prefix = Buffer.from("002408011220", "hex");
  if (mh.length !== 38 || !mh.subarray(0, 6).equals(prefix)) throw new Error("not an Ed25519 identity peer id: " + id);
  const x = mh.subarray(6).toString("base64url");
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x }, format: "jwk" });
}

const manifest = JSON.parse(readFileSync(join(dir, "vectors.json"), "utf8"));
let passed = 0, failed = 0;
for (const v of manifest.valid) {
  const problems = [];
  const doc = JSON.parse(readFileSync(join(dir, v.document), "utf8"));
  const sig = Buffer.from(doc.envelope.sender.identity_sig, "base64");
  const peerID = doc.envelope.sender.peer_id;
  delete doc.envelope.sender.identity_sig;
  const canon = Buffer.from(canonical(doc), "utf8");
  const want = readFileSync(join(dir, v.canonical));
  if (!canon.equals(want)) problems.push("canonical form differs:\n  " + canon + "\n  " + want);
  const digest = createHash("sha256").update(canon).digest();
  if (digest.toString("hex") !== v.sha256_hex) problems.push("sha256 differs");
  if (!verify(null, digest, ed25519KeyOfPeerID(peerID), sig)) problems.push("signature does not verify");
  if (problems.length) { failed++; console.log("FAIL " + v.name + ": " + problems.join("; ")); }
  else { passed++; console.log("ok   " + v.name); }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
