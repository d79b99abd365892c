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
// Open resumes the chain from the last line and refuses a log whose last file is broken;
// Append is safe for concurrent use; Tail reads and follows the log, across rotation, without
// a running node. Durability: see Log.
package audit
