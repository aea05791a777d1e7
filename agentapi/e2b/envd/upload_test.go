package envd

import (
	"io"
	"net/http"
	"net/http/httptest"
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
