package egress

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/daemon/egress/pkgcache"
)

// pypiServer is a PEP 503 index of two files: pkg's, whose hash the page
// gives right, and bad's, whose page hash matches nothing it serves.
type pypiServer struct {
	mu        sync.Mutex
	downloads map[string]int
}

var (
	wheel    = strings.Repeat("wheel bytes ", 1000)
	wheelSum = sha256hex(wheel)
)

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (s *pypiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/simple/pkg/":
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!DOCTYPE html><html><body>
<a href="../../files/pkg-1.0-py3-none-any.whl#sha256=%s">pkg-1.0-py3-none-any.whl</a>
<a href="/files/bad-1.0-py3-none-any.whl#sha256=%s">bad-1.0-py3-none-any.whl</a>
</body></html>`, wheelSum, sha256hex("what the page promised"))
	case "/files/pkg-1.0-py3-none-any.whl", "/files/bad-1.0-py3-none-any.whl":
		s.mu.Lock()
		s.downloads[r.URL.Path]++
		s.mu.Unlock()
		io.WriteString(w, wheel)
	default:
		http.NotFound(w, r)
	}
}

func TestCache(t *testing.T) {
	ps := &pypiServer{downloads: map[string]int{}}
	srv := httptest.NewServer(ps)
	defer srv.Close()
	tn := &testNet{names: map[string]string{"pypi.test": "127.0.0.1"}}
	port := strconv.Itoa(tn.serve(t, srv))
	dir := t.TempDir()
	cache, err := pkgcache.Open(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	opts := tn.options()
	opts.Cache = cache
	base := "http://pypi.test:" + port
	for i := range 2 {
		p, addr := startProxy(t, opts, Policy{Allow: mustRules(t, "pypi.test:"+port)})
		c := proxiedClient(addr, nil)
		for _, path := range []string{"/simple/pkg/", "/files/pkg-1.0-py3-none-any.whl", "/files/bad-1.0-py3-none-any.whl"} {
			code, body, err := get(t, c, base+path)
			if err != nil || code != 200 || strings.HasPrefix(path, "/files/") && body != wheel {
				t.Fatalf("proxy %d: %s: %d %v", i, path, code, err)
			}
		}
		rep := p.Close()
		if cached := rep.Records[1].Cached; cached != (i == 1) || rep.Records[2].Cached || rep.Records[0].Cached {
			t.Errorf("proxy %d: records %+v", i, rep.Records)
		}
	}
	if d := ps.downloads; d["/files/pkg-1.0-py3-none-any.whl"] != 1 || d["/files/bad-1.0-py3-none-any.whl"] != 2 {
		t.Errorf("downloads %v; want pkg once (then cached) and bad twice (never cached)", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "sha256-"+wheelSum)); err != nil {
		t.Error(err)
	}

	// Without its page, a proxy knows no hash, so the cache is not used.
	p, addr := startProxy(t, opts, Policy{Allow: mustRules(t, "pypi.test:"+port)})
	get(t, proxiedClient(addr, nil), base+"/files/pkg-1.0-py3-none-any.whl")
	if rep := p.Close(); rep.Records[0].Cached {
		t.Error("served from the cache without a hash learned from a page")
	}
}
