package egress

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
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
	cache, err := OpenCache(t.TempDir(), 1<<20)
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
	if _, err := os.Stat(filepath.Join(cache.impl.dir, "sha256-"+wheelSum)); err != nil {
		t.Error(err)
	}

	// Without its page, a proxy knows no hash, so the cache is not used.
	p, addr := startProxy(t, opts, Policy{Allow: mustRules(t, "pypi.test:"+port)})
	get(t, proxiedClient(addr, nil), base+"/files/pkg-1.0-py3-none-any.whl")
	if rep := p.Close(); rep.Records[0].Cached {
		t.Error("served from the cache without a hash learned from a page")
	}
}

func TestCacheEviction(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir, 2500)
	if err != nil {
		t.Fatal(err)
	}
	put := func(content string) string {
		t.Helper()
		sum := "sha256-" + sha256hex(content)
		body := c.impl.tee(io.NopCloser(strings.NewReader(content)), sum)
		io.ReadAll(body)
		body.Close()
		return sum
	}
	a, b := put(strings.Repeat("a", 1000)), put(strings.Repeat("b", 1000))
	if f, _, ok := c.impl.open(a); ok { // a is now the more recently used
		f.Close()
	}
	cc := put(strings.Repeat("c", 1000))
	for sum, want := range map[string]bool{a: true, b: false, cc: true} {
		if _, err := os.Stat(filepath.Join(dir, sum)); (err == nil) != want {
			t.Errorf("%s on disk: %v, want %v", sum[:15], err == nil, want)
		}
	}
	os.WriteFile(filepath.Join(dir, "tmp-123"), []byte("cut"), 0o600)
	again, err := OpenCache(dir, 2500)
	if err != nil || len(again.impl.files) != 2 || again.impl.size != 2000 {
		t.Errorf("reopened: %+v %v", again.impl.files, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tmp-123")); err == nil {
		t.Error("a cut download survived a reopen")
	}
}

// FuzzLearn: an index page is whatever an allowed host sends; learning
// from it never panics and keeps only well-formed http(s) URLs and hashes.
func FuzzLearn(f *testing.F) {
	f.Add(`<a href="../f/x.whl#sha256=`+wheelSum+`">x</a>`, uint8(0))
	f.Add(`{"files":[{"url":"/f/x.whl","hashes":{"sha256":"`+wheelSum+`"}}]}`, uint8(1))
	f.Add(`{"versions":{"1.0.0":{"dist":{"tarball":"https://r.test/x/-/x-1.0.0.tgz","integrity":"sha512-`+npmIntegrity+`"}}}}`, uint8(2))
	page, _ := url.Parse("https://pypi.test/simple/x/")
	f.Fuzz(func(t *testing.T, body string, kind uint8) {
		var x hashIndex
		switch kind % 3 {
		case 0:
			x.learnHTML(page, []byte(body))
		case 1:
			x.learnJSON(page, []byte(body))
		default:
			x.learnNPM(page, []byte(body))
		}
		for k, sum := range x.m {
			u, err := url.Parse(k)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Fragment != "" || !validDigest(sum) {
				t.Errorf("learned %q -> %q", k, sum)
			}
		}
	})
}

// npmIntegrity is the base64 sha512 of "tarball", as npm's metadata gives it.
var npmIntegrity = func() string {
	s := sha512.Sum512([]byte("tarball"))
	return base64.StdEncoding.EncodeToString(s[:])
}()

func TestLearn(t *testing.T) {
	page, _ := url.Parse("https://pypi.test/simple/pkg/")
	sum := "sha256-" + wheelSum
	npmSum := sha512.Sum512([]byte("tarball"))
	npm := "sha512-" + hex.EncodeToString(npmSum[:])
	for _, tc := range []struct {
		name, ctype, enc, body string
		want                   map[string]string
	}{
		{name: "PEP 503 relative", ctype: "text/html; charset=utf-8", body: `<a href="../../f/p.whl#sha256=` + wheelSum + `">p</a>`,
			want: map[string]string{"https://pypi.test:443/f/p.whl": sum}},
		{name: "PEP 503 other host", ctype: "application/vnd.pypi.simple.v1+html", body: `<a href="https://files.test/p.whl#sha256=` + strings.ToUpper(wheelSum) + `">`,
			want: map[string]string{"https://files.test:443/p.whl": sum}},
		{name: "no or bad hash", ctype: "text/html", body: `<a href="/a.whl">a</a><a href="/b.whl#sha256=00">b</a><a href="/c.whl#md5=` + wheelSum[:32] + `">c</a>`,
			want: map[string]string{}},
		{name: "PEP 691", ctype: "application/vnd.pypi.simple.v1+json", body: `{"files":[{"url":"p.whl","hashes":{"sha256":"` + wheelSum + `"}}]}`,
			want: map[string]string{"https://pypi.test:443/simple/pkg/p.whl": sum}},
		{name: "gzip", ctype: "text/html", enc: "gzip", body: `<a href="/p.whl#sha256=` + wheelSum + `">`,
			want: map[string]string{"https://pypi.test:443/p.whl": sum}},
		{name: "npm abbreviated metadata", ctype: "application/vnd.npm.install-v1+json",
			body: `{"name":"x","versions":{"1.0.0":{"dist":{"tarball":"https://r.test/x/-/x-1.0.0.tgz","shasum":"0000","integrity":"sha512-` + npmIntegrity + `"}},` +
				`"0.9.0":{"dist":{"tarball":"https://r.test/x/-/x-0.9.0.tgz","shasum":"1111"}}}}`,
			want: map[string]string{"https://r.test:443/x/-/x-1.0.0.tgz": npm}},
		{name: "npm full document (any JSON API) not read", ctype: "application/json",
			body: `{"versions":{"1.0.0":{"dist":{"tarball":"https://r.test/x.tgz","integrity":"sha512-` + npmIntegrity + `"}}}}`,
			want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			if tc.enc == "gzip" {
				var buf bytes.Buffer
				zw := gzip.NewWriter(&buf)
				zw.Write(body)
				zw.Close()
				body = buf.Bytes()
			}
			var x hashIndex
			r := x.learnFrom(page, pageKind(tc.ctype), tc.enc, io.NopCloser(bytes.NewReader(body)))
			if got, _ := io.ReadAll(r); !bytes.Equal(got, body) {
				t.Fatal("the page was changed on its way")
			}
			if len(x.m) != len(tc.want) {
				t.Errorf("learned %v, want %v", x.m, tc.want)
			}
			for k, v := range tc.want {
				if x.lookup(k) != v {
					t.Errorf("learned %v, want %v", x.m, tc.want)
				}
			}
		})
	}
}
