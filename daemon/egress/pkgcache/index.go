package pkgcache

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/net/html"
)

// Bounds on what a sandbox's pages can make the proxy hold: the page read
// along as it is forwarded, and the hashes learned over the proxy's life.
const (
	maxPage   = 32 << 20
	maxHashes = 500_000
)

// Index maps the URLs of package files (cacheKey) to the digests the
// index pages this proxy forwarded gave them. Each proxy has its own (the
// zero value is ready): one sandbox's pages never teach another's proxy.
type Index struct {
	mu sync.Mutex
	m  map[string]string
}

// Lookup is the digest learned for the package file at u, "" if none.
func (x *Index) Lookup(u *url.URL) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[cacheKey(u)]
}

func (x *Index) add(page *url.URL, href, digest string) {
	ref, err := url.Parse(strings.TrimSpace(href))
	if err != nil || digest == "" {
		return
	}
	u := page.ResolveReference(ref)
	if u.Scheme != "http" && u.Scheme != "https" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]string{}
	}
	if len(x.m) < maxHashes {
		x.m[cacheKey(u)] = digest
	}
}

// cacheKey is a URL as the index keys it: scheme://host:port/path?query,
// with the port explicit and no fragment.
func cacheKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	k := u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port) + u.EscapedPath()
	if u.RawQuery != "" {
		k += "?" + u.RawQuery
	}
	return k
}

// pageKind says whether a response is an index page to learn from: PEP
// 503 HTML (pypi.org still answers text/html to pip), PEP 691 JSON, or
// npm's abbreviated package metadata (what npm install asks for; the full
// document, plain application/json, is not read: any JSON API answers
// that).
func pageKind(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "text/html", "application/vnd.pypi.simple.v1+html":
		return "html"
	case "application/vnd.pypi.simple.v1+json":
		return "json"
	case "application/vnd.npm.install-v1+json":
		return "npm"
	}
	return ""
}

// Learn returns body, the response to a GET of page with the given
// Content-Type and Content-Encoding, as it is. When it is an index page
// (pageKind) it is read along, and at its end the page's file hashes are
// learned.
func (x *Index) Learn(page *url.URL, contentType, encoding string, body io.ReadCloser) io.ReadCloser {
	kind := pageKind(contentType)
	if kind == "" {
		return body
	}
	return &pageReader{ReadCloser: body, done: func(b []byte) {
		if encoding == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return
			}
			if b, err = io.ReadAll(io.LimitReader(zr, maxPage)); err != nil {
				return
			}
		} else if encoding != "" && encoding != "identity" {
			return
		}
		switch kind {
		case "json":
			x.learnJSON(page, b)
		case "npm":
			x.learnNPM(page, b)
		default:
			x.learnHTML(page, b)
		}
	}}
}

// learnHTML takes every <a href="...#sha256=HEX"> (PEP 503).
func (x *Index) learnHTML(page *url.URL, b []byte) {
	z := html.NewTokenizer(bytes.NewReader(b))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			if string(name) != "a" {
				continue
			}
			for more {
				var k, v []byte
				k, v, more = z.TagAttr()
				if string(k) != "href" {
					continue
				}
				if _, frag, ok := strings.Cut(string(v), "#"); ok {
					if sum, ok := strings.CutPrefix(frag, "sha256="); ok {
						x.add(page, string(v), hexDigest("sha256", strings.ToLower(sum)))
					}
				}
			}
		}
	}
}

// learnJSON takes files[].url with hashes.sha256 (PEP 691).
func (x *Index) learnJSON(page *url.URL, b []byte) {
	var doc struct {
		Files []struct {
			URL    string            `json:"url"`
			Hashes map[string]string `json:"hashes"`
		} `json:"files"`
	}
	if json.Unmarshal(b, &doc) != nil {
		return
	}
	for _, f := range doc.Files {
		if sum := f.Hashes["sha256"]; sum != "" {
			x.add(page, f.URL, hexDigest("sha256", strings.ToLower(sum)))
		}
	}
}

// learnNPM takes versions.*.dist.tarball with its sha512 integrity (npm's
// abbreviated metadata; Subresource Integrity form "sha512-BASE64").
func (x *Index) learnNPM(page *url.URL, b []byte) {
	var doc struct {
		Versions map[string]struct {
			Dist struct {
				Tarball   string `json:"tarball"`
				Integrity string `json:"integrity"`
			} `json:"dist"`
		} `json:"versions"`
	}
	if json.Unmarshal(b, &doc) != nil {
		return
	}
	for _, v := range doc.Versions {
		// An integrity may list several hashes; the sha512 one counts.
		for _, i := range strings.Fields(v.Dist.Integrity) {
			if sum, ok := strings.CutPrefix(i, "sha512-"); ok {
				if raw, err := base64.StdEncoding.DecodeString(sum); err == nil {
					x.add(page, v.Dist.Tarball, newDigest("sha512", raw))
				}
			}
		}
	}
}

// pageReader keeps what passes through it, up to maxPage, and hands it to
// done at EOF.
type pageReader struct {
	io.ReadCloser
	buf  bytes.Buffer
	done func([]byte)
	over bool
}

func (r *pageReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if !r.over {
		r.buf.Write(p[:n])
		r.over = r.buf.Len() > maxPage
	}
	if errors.Is(err, io.EOF) && !r.over && r.done != nil {
		r.done(r.buf.Bytes())
		r.done = nil
	}
	return n, err
}
