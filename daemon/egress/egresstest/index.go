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
// PREFIX. Each PREFIX has a wheel of its own content (a benchmark gives
// each round its own, so that its first fetch is not in a cache that
// keys files by their hash). It counts the wheel's downloads.
type Index struct {
	padding int

	mu        sync.Mutex
	wheels    map[string]wheel // by prefix
	downloads map[string]int   // path -> times served
}

type wheel struct {
	data []byte
	sum  string
}

// NewIndex serves wheels with padding bytes of data in them (larger
// wheels for benchmarks; 0 for tests).
func NewIndex(padding int) (*Index, error) {
	x := &Index{padding: padding, wheels: map[string]wheel{}, downloads: map[string]int{}}
	if _, err := x.wheel(""); err != nil {
		return nil, err
	}
	return x, nil
}

// wheel returns prefix's wheel, building it the first time.
func (x *Index) wheel(prefix string) (wheel, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if w, ok := x.wheels[prefix]; ok {
		return w, nil
	}
	data, err := BuildWheel(x.padding, prefix)
	if err != nil {
		return wheel{}, err
	}
	s := sha256.Sum256(data)
	w := wheel{data, hex.EncodeToString(s[:])}
	x.wheels[prefix] = w
	return w, nil
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
	page, file := "/simple/"+Package+"/", "/files/"+WheelName
	var prefix string
	switch {
	case strings.HasSuffix(r.URL.Path, page):
		prefix = strings.TrimSuffix(r.URL.Path, page)
	case strings.HasSuffix(r.URL.Path, file):
		prefix = strings.TrimSuffix(r.URL.Path, file)
	default:
		http.NotFound(w, r)
		return
	}
	wh, err := x.wheel(prefix)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if strings.HasSuffix(r.URL.Path, page) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="%s%s#sha256=%s">%s</a></body></html>`, prefix, file, wh.sum, WheelName)
		return
	}
	x.mu.Lock()
	x.downloads[r.URL.Path]++
	x.mu.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(wh.data)
}

// BuildWheel makes a minimal pure-Python wheel of Package with a RECORD
// pip checks, plus padding bytes of data (nsboxdemo/data.bin); tag makes
// wheels of distinct content.
func BuildWheel(padding int, tag string) ([]byte, error) {
	files := []struct{ name, body string }{
		{Package + "/__init__.py", "VALUE = 42\n# " + tag + "\n"},
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
