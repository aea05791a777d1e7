// Package pkgcache is the egress proxy's package cache: a store of
// package files (wheels, sdists, npm tarballs) keyed by their digest
// (Cache), and the index that maps package-file URLs to the digests the
// index pages a proxy forwarded published (Index).
//
// The two are apart on purpose. The Cache is the daemon's, shared by every
// sandbox; an Index belongs to one proxy, so to one sandbox. A file is
// served only for a URL whose digest the sandbox's own proxy learned, and
// the Cache takes a file only if its bytes have that digest: nothing a
// sandbox sends or reaches can make another sandbox be served bytes other
// than the ones published for the URL it asked for.
package pkgcache

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Cache keeps package files by their digest and serves one only for a
// URL whose digest the sandbox's own proxy learned from an index page it
// forwarded (PEP 503 links carry "#sha256=..."; PEP 691 JSON a "hashes"
// object; npm's abbreviated metadata a sha512 "integrity"). A file is kept
// only if its content has that hash, so nothing a sandbox sends can put
// bytes in the cache under a name they do not have. The URL-to-hash index
// lives in each Proxy (an Index), not the Cache: a page served by a host
// one sandbox may reach cannot steer what another is served. A Cache is
// shared, size-capped and safe for concurrent use.
type Cache struct {
	dir string
	max int64

	mu    sync.Mutex
	files map[string]*cacheFile // by digest ("sha256-HEX"), also the file's name
	size  int64
}

type cacheFile struct {
	size int64
	used time.Time // for LRU eviction; in memory, from mtime at open
}

// Open opens (creating) the cache in dir, holding at most maxBytes.
func Open(dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress cache: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("egress cache: %w", err)
	}
	c := &Cache{dir: dir, max: maxBytes, files: map[string]*cacheFile{}}
	for _, e := range ents {
		fi, err := e.Info()
		switch {
		case err != nil:
		case strings.HasPrefix(e.Name(), "tmp-"): // a download cut by a restart
			os.Remove(filepath.Join(dir, e.Name()))
		case validDigest(e.Name()) && fi.Mode().IsRegular():
			c.files[e.Name()] = &cacheFile{size: fi.Size(), used: fi.ModTime()}
			c.size += fi.Size()
		}
	}
	c.mu.Lock()
	c.evict()
	c.mu.Unlock()
	return c, nil
}

// A digest names a file by its content and is its name in the cache:
// "sha256-HEX" or "sha512-HEX" (lower-case hex). Weaker hashes (npm's
// sha1 shasum, md5) are never taken: a collision would let a sandbox
// choose what another is served.
var digestSizes = map[string]int{"sha256": sha256.Size, "sha512": sha512.Size}

// newDigest makes the digest of algo and sum (raw bytes), "" for an
// algorithm or size not taken.
func newDigest(algo string, sum []byte) string {
	if n, ok := digestSizes[algo]; !ok || len(sum) != n {
		return ""
	}
	return algo + "-" + hex.EncodeToString(sum)
}

// hexDigest is newDigest for a hex sum.
func hexDigest(algo, sum string) string {
	b, err := hex.DecodeString(sum)
	if err != nil {
		return ""
	}
	return newDigest(algo, b)
}

func validDigest(s string) bool {
	algo, sum, ok := strings.Cut(s, "-")
	return ok && sum == strings.ToLower(sum) && hexDigest(algo, sum) == s
}

// digestHash is a fresh hash of a valid digest's algorithm.
func digestHash(d string) hash.Hash {
	if strings.HasPrefix(d, "sha512-") {
		return sha512.New()
	}
	return sha256.New()
}

// Get returns the file with digest sum, open, and its size if the cache
// holds it. Only a digest the caller's Index gave may be asked for.
func (c *Cache) Get(sum string) (*os.File, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.files[sum]
	if !ok {
		return nil, 0, false
	}
	f, err := os.Open(filepath.Join(c.dir, sum))
	if err != nil {
		delete(c.files, sum)
		c.size -= e.size
		return nil, 0, false
	}
	e.used = time.Now()
	return f, e.size, true
}

// evict removes the least recently used files until the cache fits.
func (c *Cache) evict() {
	for c.size > c.max && len(c.files) > 0 {
		var oldest string
		for sum, e := range c.files {
			if oldest == "" || e.used.Before(c.files[oldest].used) {
				oldest = sum
			}
		}
		os.Remove(filepath.Join(c.dir, oldest))
		c.size -= c.files[oldest].size
		delete(c.files, oldest)
	}
}

// fill tees a download into a temporary file and commits it under want
// only if the whole body hashes to want.
type fill struct {
	io.ReadCloser
	c    *Cache
	want string
	tmp  *os.File // nil once committed or abandoned
	hash hash.Hash
	n    int64
}

// Fill returns body as it is, teeing it into the cache: read to its end,
// it is kept under the digest want if its bytes have that digest, and
// dropped otherwise (or when closed before its end, or larger than the
// cache).
func (c *Cache) Fill(body io.ReadCloser, want string) io.ReadCloser {
	tmp, err := os.CreateTemp(c.dir, "tmp-")
	if err != nil {
		return body
	}
	return &fill{ReadCloser: body, c: c, want: want, tmp: tmp, hash: digestHash(want)}
}

func (f *fill) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if f.tmp != nil && n > 0 {
		f.hash.Write(p[:n])
		f.n += int64(n)
		if _, werr := f.tmp.Write(p[:n]); werr != nil || f.n > f.c.max {
			f.abandon()
		}
	}
	if errors.Is(err, io.EOF) && f.tmp != nil {
		f.commit()
	}
	return n, err
}

func (f *fill) Close() error {
	if f.tmp != nil {
		f.abandon()
	}
	return f.ReadCloser.Close()
}

func (f *fill) abandon() {
	f.tmp.Close()
	os.Remove(f.tmp.Name())
	f.tmp = nil
}

func (f *fill) commit() {
	algo, _, _ := strings.Cut(f.want, "-")
	if newDigest(algo, f.hash.Sum(nil)) != f.want || f.tmp.Close() != nil {
		f.abandon()
		return
	}
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.files[f.want]; ok || os.Rename(f.tmp.Name(), filepath.Join(c.dir, f.want)) != nil {
		os.Remove(f.tmp.Name())
		f.tmp = nil
		return
	}
	f.tmp = nil
	c.files[f.want] = &cacheFile{size: f.n, used: time.Now()}
	c.size += f.n
	c.evict()
}
