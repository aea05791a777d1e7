package envd

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCutUploadIsTheClients: an upload whose body ends early (the client
// left) is a 400, not a 500, whether raw or a multipart form.
func TestCutUploadIsTheClients(t *testing.T) {
	h := newHandler(t, &fakeCore{dir: t.TempDir()})
	cut := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s), errReader{io.ErrUnexpectedEOF}) }
	for _, tc := range []struct{ name, ct, body string }{
		{"raw", "application/octet-stream", "hello"},
		{"multipart", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\n\r\nhel"},
	} {
		r := httptest.NewRequest("POST", "/files?path=/home/user/x.txt", cut(tc.body))
		r.Header.Set("Content-Type", tc.ct)
		w := serve(t, h, Sandbox{ID: "sbA"}, r)
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, w.Code, w.Body)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestGzipBombIs413: a gzip upload that inflates past the upload cap is
// 413 and stores nothing (issue 35: it was stored cut at the cap + 1 byte
// with 200); one that inflates to the cap exactly is stored whole.
func TestGzipBombIs413(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		want int
	}{
		{"at the cap", 1 << 20, http.StatusOK},
		{"past the cap", 1<<20 + 1, http.StatusRequestEntityTooLarge},
		{"far past the cap", 64 << 20, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := &fakeCore{dir: t.TempDir()}
			h := newHandler(t, core) // MaxUploadBytes 1 MiB
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			if _, err := zw.Write(make([]byte, tc.size)); err != nil {
				t.Fatal(err)
			}
			zw.Close()
			r := httptest.NewRequest("POST", "/files?path=/home/user/bomb", &z)
			r.Header.Set("Content-Type", "application/octet-stream")
			r.Header.Set("Content-Encoding", "gzip")
			w := serve(t, h, Sandbox{ID: "sbA"}, r)
			if w.Code != tc.want {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.want)
			}
			fi, err := os.Stat(filepath.Join(core.dir, "bomb"))
			switch {
			case tc.want == http.StatusOK && (err != nil || fi.Size() != int64(tc.size)):
				t.Fatalf("stored %v %v, want %d bytes", fi, err, tc.size)
			case tc.want != http.StatusOK && !errors.Is(err, fs.ErrNotExist):
				t.Fatalf("a refused upload stored a file: %v", err)
			}
		})
	}
}
