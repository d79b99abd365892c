package store

import (
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// Records survive a reopen, are kept per kind, replaced by id, deleted, and bounded.
func TestRecords_PutReplaceDeleteSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for _, r := range [][3]string{{"workflow", "w1", "one"}, {"workflow", "w2", "two"}, {"other", "w1", "x"}, {"workflow", "w1", "one'"}} {
		if err := s.PutRecord(r[0], r[1], []byte(r[2])); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutRecord("workflow", "big", make([]byte, MaxRecordBytes+1)); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("an oversized record: %v", err)
	}
	if err := s.PutRecord("", "x", nil); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("an empty kind: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	got, err := s.Records("workflow")
	if err != nil || len(got) != 2 || string(got["w1"]) != "one'" || string(got["w2"]) != "two" {
		t.Fatalf("records: %q %v", got, err)
	}
	if err := s.DeleteRecord("workflow", "w1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Records("workflow"); len(got) != 1 {
		t.Fatalf("after delete: %q", got)
	}
	if got, _ := s.Records("other"); string(got["w1"]) != "x" {
		t.Fatalf("another kind: %q", got)
	}
}
