// Package audit is the node's tamper-evident audit trail (IaCP 1.0 section 6.3 "complete
// logging of all inter-agent communications"; ACP v2 "Audit Trail"): an append-only,
// human-readable JSON-lines log of every message sent, received, refused, expired,
// delivered and acknowledged.
//
// Each line is one Entry. Its prev field is the SHA-256 (hex) of the bytes of the line
// before it, without the newline; the first entry chains from GenesisHash. The chain runs
// across rotated files (audit-000001.jsonl, audit-000002.jsonl, ...), so changing, removing,
// inserting or reordering a line breaks it at that point, and Verify names the file and line.
// A hash chain cannot stop someone who rewrites every line after the one they change; copy
// the head hash that Verify reports somewhere else to anchor it.
//
// The log is bounded: input the node refuses is recorded without its payload (Refusal), and
// retention removes the oldest whole files over MaxTotalBytes or MaxAge, after recording
// them in an EventRetention entry that Verify checks the first kept line against.
//
// Open resumes the chain from the last line. A damaged last file does not stop the node:
// Open leaves it as it is and starts a new segment in a new file, anchored to the damaged
// file's last line (EventChainBroken); Verify reports the break and checks the new segment.
// Append is safe for concurrent use; Tail reads and follows the log, across rotation and
// segments, without a running node. Durability: see Log.
package audit
