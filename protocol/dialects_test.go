package protocol_test

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// docForeignRows reads the table between the foreign-codes markers of docs/protocol.md.
func docForeignRows(t *testing.T) [][]string {
	f, err := os.Open("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- foreign-codes:begin -->":
			in = true
		case line == "<!-- foreign-codes:end -->":
			return rows
		case in && strings.HasPrefix(line, "| `"):
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
			}
			if len(cells) != 6 {
				t.Fatalf("malformed row %q", line)
			}
			rows = append(rows, cells)
		}
	}
	t.Fatal("docs/protocol.md has no foreign-codes table")
	return nil
}

// TestDialects_DocTableAndCodeAgree: every row of the documented table is what
// MapForeignCode does, and the table lists every mapping the code has.
func TestDialects_DocTableAndCodeAgree(t *testing.T) {
	rows := docForeignRows(t)
	code := protocol.ForeignCodes()
	if len(rows) != len(code) {
		t.Fatalf("docs/protocol.md lists %d foreign codes, protocol/dialects.go %d", len(rows), len(code))
	}
	for i, r := range rows {
		dialect, foreign, source, theirRetry, iacp, ourRetry := r[0], r[1], r[2], r[3], r[4], r[5]
		t.Run(dialect+"/"+foreign, func(t *testing.T) {
			got, ok := protocol.MapForeignCode(dialect, foreign)
			if !ok || string(got) != iacp {
				t.Fatalf("MapForeignCode(%s, %s) = %s, %v; the table says %s", dialect, foreign, got, ok, iacp)
			}
			f := code[i]
			if f.Dialect != dialect || f.Code != foreign || f.Source != source || string(f.IACP) != iacp {
				t.Fatalf("row %d is %+v in the code", i, f)
			}
			info, registered := protocol.Lookup(got)
			if !registered {
				t.Fatalf("%s is not a registered code", got)
			}
			if want := map[bool]string{true: "yes", false: "no"}[info.Retryable]; ourRetry != want {
				t.Fatalf("our retry is %q in the table, %q in the registry", ourRetry, want)
			}
			if theirRetry != "-" && theirRetry != f.TheirRetry || theirRetry == "-" && f.TheirRetry != "" {
				t.Fatalf("their retry %q in the table, %q in the code", theirRetry, f.TheirRetry)
			}
			// Where the other draft gives retry advice, it agrees with ours.
			if f.TheirRetry != "" && f.TheirRetry != ourRetry {
				t.Fatalf("%s says retry %s, we say %s", dialect, f.TheirRetry, ourRetry)
			}
		})
	}
}

func TestDialects_CaseInsensitiveAndUnknown(t *testing.T) {
	for _, c := range []struct{ dialect, code string }{{"acp-v2", "USER_ERROR"}, {"ACP-V2", "user_error"}, {"iacp-1.0", "invalid_format"}} {
		if got, ok := protocol.MapForeignCode(c.dialect, c.code); !ok || got != protocol.CodePayloadInvalid {
			t.Errorf("MapForeignCode(%s, %s) = %s, %v", c.dialect, c.code, got, ok)
		}
	}
	for _, c := range []struct{ dialect, code string }{{"a2acp", "NOPE"}, {"nope", "TIMEOUT"}, {"", ""}, {"elizaos", "TIMEOUT"}} {
		if got, ok := protocol.MapForeignCode(c.dialect, c.code); ok {
			t.Errorf("MapForeignCode(%s, %s) = %s, want not found", c.dialect, c.code, got)
		}
	}
}

// The one list of dialects: IACP first, every foreign code's dialect in it, names read as a
// person writes a list.
func TestDialects_TheOneList(t *testing.T) {
	names := protocol.DialectNames(false)
	if len(names) == 0 || names[0] != protocol.DialectIACP {
		t.Fatalf("dialects %v; want IACP first", names)
	}
	for _, f := range protocol.ForeignCodes() {
		if !slices.Contains(names, f.Dialect) {
			t.Errorf("foreign code %s of dialect %s, which Dialects does not list", f.Code, f.Dialect)
		}
	}
	if got := protocol.DialectList([]string{"a", "b", "c"}); got != "a, b or c" {
		t.Fatalf("DialectList: %q", got)
	}
	if slices.Contains(protocol.DialectNames(true), protocol.DialectA2ACP) {
		t.Fatal("A2ACP documents are not sent by agents")
	}
}
