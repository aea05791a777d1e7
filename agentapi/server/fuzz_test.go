package server

import (
	"bytes"
	"errors"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a/b.txt", "../x", "/etc", "a/../b", "./a", "a//b", "a/", ".", "", "a\x00b", "..", "...", "a/..b", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		if !filepath.IsLocal(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") {
			t.Fatalf("ValidatePath accepted %q", p)
		}
		for _, el := range strings.Split(p, "/") {
			if el == ".." || el == "." || el == "" {
				t.Fatalf("ValidatePath accepted %q with element %q", p, el)
			}
		}
	})
}

func FuzzDecodeRunRequest(f *testing.F) {
	for _, s := range []string{
		`{"argv":["echo","hi"]}`,
		`{"language":"python","code":"print(1)","stdin":"x","env":{"A":"1"},"limits":{"timeout_ms":1000,"cpus":0.5}}`,
		`{"argv":["x"],"files":[{"path":"a/b","content_base64":"AAEC","mode":420},{"path":"t","text":"hi"}],"return_files":["*.png"]}`,
		`{"argv":["x"],"rootfs":"default","limits":{"memory_bytes":-1}}`,
		`{"argv":[`, `{}`, `[]`, `null`, `{"argv":["x"]}{}`, `{"unknown":1}`,
	} {
		f.Add([]byte(s))
	}
	srv, err := New(Config{Runner: &fakeRunner{}, Rootfs: &fakeStore{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRunRequest(http.MaxBytesReader(nil, nopCloser{bytes.NewReader(body)}, 1<<16))
		if err != nil {
			var fe *FieldError
			var mbe *http.MaxBytesError
			if !errors.As(err, &fe) && !errors.As(err, &mbe) {
				t.Fatalf("decode error %v (%T) is neither a FieldError nor a MaxBytesError", err, err)
			}
			return
		}
		j, err := srv.validate(req)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("validate error %v (%T) is not a FieldError", err, err)
			}
			return
		}
		for _, f := range j.files {
			if ValidatePath(f.Path) != nil || f.Mode > 0o777 {
				t.Fatalf("validated job has a bad file %+v", f)
			}
		}
		if len(j.argv) == 0 && j.language == "" {
			t.Fatal("validated job has no command")
		}
		if j.limits.Timeout <= 0 || j.limits.Timeout > srv.cfg.MaxLimits.Timeout || j.limits.MemoryBytes > srv.cfg.MaxLimits.MemoryBytes {
			t.Fatalf("validated limits %+v out of bounds", j.limits)
		}
	})
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
