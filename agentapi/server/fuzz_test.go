package server

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/nsbox/nsbox/daemon/errdefs"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
)

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"argv":["echo","hi"]}`,
		`{"language":"python","code":"print(1)","stdin":"x","env":{"A":"1"},"limits":{"timeout_ms":1000,"cpus":0.5}}`,
		`{"argv":["x"],"files":[{"path":"a/b","content_base64":"AAEC","mode":420},{"path":"t","text":"hi"}],"return_files":["*.png"]}`,
		`{"argv":["x"],"rootfs":"default","limits":{"memory_bytes":-1}}`,
		`{"argv":[`, `{}`, `[]`, `null`, `{"argv":["x"]}{}`, `{"unknown":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req agentapi.RunRequest
		err := httpkit.Decode(http.MaxBytesReader(nil, nopCloser{bytes.NewReader(body)}, 1<<16), &req)
		var fe *errdefs.FieldError
		var mbe *http.MaxBytesError
		if err == nil {
			return
		}
		if !errors.As(err, &fe) && !errors.As(err, &mbe) {
			t.Fatalf("decode error %v (%T) is neither a FieldError nor a MaxBytesError", err, err)
		}
		if st, _ := ToHTTP(err); st != http.StatusBadRequest && st != http.StatusRequestEntityTooLarge {
			t.Fatalf("decode error %v answers %d", err, st)
		}
	})
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
