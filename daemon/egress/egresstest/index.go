// Package egresstest serves what the egress tests and benchmarks fetch
// through the proxy: a PEP 503 package index of one wheel the package
// builds, on an httptest server on 127.0.0.1, counting what it serves.
package egresstest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Package is the wheel's distribution name; `import nsboxdemo` then gives
// nsboxdemo.VALUE == 42.
const Package = "nsboxdemo"

// WheelName is the wheel's file name.
const WheelName = Package + "-1.0-py3-none-any.whl"

// Index is an http.Handler serving /PREFIX/simple/nsboxdemo/ (a page
// linking the wheel with its #sha256) and /PREFIX/files/WHEEL, for any
// PREFIX (a benchmark gives each round its own URLs, so its first fetch
// is uncached). It counts the wheel's downloads.
type Index struct {
	wheel []byte
	sum   string

	mu        sync.Mutex
	downloads map[string]int // path -> times served
}

// NewIndex builds the wheel, with padding bytes of data in it (a larger
// wheel for benchmarks; 0 for tests).
func NewIndex(padding int) (*Index, error) {
	w, err := BuildWheel(padding)
	if err != nil {
		return nil, err
	}
	s := sha256.Sum256(w)
	return &Index{wheel: w, sum: hex.EncodeToString(s[:]), downloads: map[string]int{}}, nil
}

// Downloads says how many times the wheel was served.
func (x *Index) Downloads() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, c := range x.downloads {
		n += c
	}
	return n
}

func (x *Index) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/simple/"+Package+"/"):
		prefix := strings.TrimSuffix(r.URL.Path, "/simple/"+Package+"/")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="%s/files/%s#sha256=%s">%s</a></body></html>`, prefix, WheelName, x.sum, WheelName)
	case strings.HasSuffix(r.URL.Path, "/files/"+WheelName):
		x.mu.Lock()
		x.downloads[r.URL.Path]++
		x.mu.Unlock()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(x.wheel)
	default:
		http.NotFound(w, r)
	}
}

// BuildWheel makes a minimal pure-Python wheel of Package with a RECORD
// pip checks, plus padding bytes of data (nsboxdemo/data.bin).
func BuildWheel(padding int) ([]byte, error) {
	files := []struct{ name, body string }{
		{Package + "/__init__.py", "VALUE = 42\n"},
		{Package + "-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: " + Package + "\nVersion: 1.0\n"},
		{Package + "-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: nsbox-egresstest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	if padding > 0 {
		files = append(files, struct{ name, body string }{Package + "/data.bin", strings.Repeat("n", padding)})
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			return nil, err
		}
		h := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(h[:]), len(f.body))
	}
	record.WriteString(Package + "-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create(Package + "-1.0.dist-info/RECORD")
	if err != nil {
		return nil, err
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
