package pkgcache

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"strings"
	"testing"
)

// wheelSum is the sha256 of a package file, as a PEP 503 page gives it.
var wheelSum = sha256hex(strings.Repeat("wheel bytes ", 1000))

// FuzzLearn: an index page is whatever an allowed host sends; learning
// from it never panics and keeps only well-formed http(s) URLs and hashes.
func FuzzLearn(f *testing.F) {
	f.Add(`<a href="../f/x.whl#sha256=`+wheelSum+`">x</a>`, uint8(0))
	f.Add(`{"files":[{"url":"/f/x.whl","hashes":{"sha256":"`+wheelSum+`"}}]}`, uint8(1))
	f.Add(`{"versions":{"1.0.0":{"dist":{"tarball":"https://r.test/x/-/x-1.0.0.tgz","integrity":"sha512-`+npmIntegrity+`"}}}}`, uint8(2))
	page, _ := url.Parse("https://pypi.test/simple/x/")
	f.Fuzz(func(t *testing.T, body string, kind uint8) {
		var x Index
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
			var x Index
			r := x.Learn(page, tc.ctype, tc.enc, io.NopCloser(bytes.NewReader(body)))
			if got, _ := io.ReadAll(r); !bytes.Equal(got, body) {
				t.Fatal("the page was changed on its way")
			}
			if len(x.m) != len(tc.want) {
				t.Errorf("learned %v, want %v", x.m, tc.want)
			}
			for k, v := range tc.want {
				if u, _ := url.Parse(k); x.Lookup(u) != v {
					t.Errorf("learned %v, want %v", x.m, tc.want)
				}
			}
		})
	}
}
