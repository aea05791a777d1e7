package pkgcache

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestCacheEviction(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 2500)
	if err != nil {
		t.Fatal(err)
	}
	put := func(content string) string {
		t.Helper()
		sum := "sha256-" + sha256hex(content)
		body := c.Fill(io.NopCloser(strings.NewReader(content)), sum)
		io.ReadAll(body)
		body.Close()
		return sum
	}
	a, b := put(strings.Repeat("a", 1000)), put(strings.Repeat("b", 1000))
	if f, _, ok := c.Get(a); ok { // a is now the more recently used
		f.Close()
	}
	cc := put(strings.Repeat("c", 1000))
	for sum, want := range map[string]bool{a: true, b: false, cc: true} {
		if _, err := os.Stat(filepath.Join(dir, sum)); (err == nil) != want {
			t.Errorf("%s on disk: %v, want %v", sum[:15], err == nil, want)
		}
	}
	os.WriteFile(filepath.Join(dir, "tmp-123"), []byte("cut"), 0o600)
	again, err := Open(dir, 2500)
	if err != nil || len(again.files) != 2 || again.size != 2000 {
		t.Errorf("reopened: %+v %v", again.files, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tmp-123")); err == nil {
		t.Error("a cut download survived a reopen")
	}
}
