package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The docs' index (docs/README.md) links every page under docs/, and every link it holds
// leads to a page that exists: a newcomer who reads it in order misses nothing.
func TestDocs_TheIndexLinksEveryPage(t *testing.T) {
	docs := filepath.Join(root(t), "docs")
	index, err := os.ReadFile(filepath.Join(docs, "README.md"))
	if err != nil {
		t.Fatalf("docs/README.md, the index of the docs: %v", err)
	}
	linked := map[string]bool{}
	for _, m := range regexp.MustCompile(`\]\(([^)#]+\.md)\)`).FindAllStringSubmatch(string(index), -1) {
		linked[m[1]] = true
		if _, err := os.Stat(filepath.Join(docs, m[1])); err != nil {
			t.Errorf("docs/README.md links %s, which does not exist", m[1])
		}
	}
	err = filepath.WalkDir(docs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel, _ := filepath.Rel(docs, path)
		if rel != "README.md" && !linked[filepath.ToSlash(rel)] {
			t.Errorf("docs/%s is not in the index: add it to docs/README.md, in reading order", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
