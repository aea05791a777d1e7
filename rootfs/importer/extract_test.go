package importer

import (
	"strings"
	"testing"
)

func FuzzCleanEntryName(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/etc/passwd", "a/../../b", "./.", "a//b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		rel, err := cleanEntryName(name)
		if err != nil {
			return
		}
		if strings.HasPrefix(rel, "/") || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/../") || strings.HasSuffix(rel, "/..") {
			t.Fatalf("cleanEntryName(%q) = %q escapes", name, rel)
		}
	})
}
