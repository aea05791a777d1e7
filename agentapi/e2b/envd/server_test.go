package envd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/procs"
)

// fakeCore serves one workspace from a directory and records which
// session each call named; what a test does not use panics (the embedded
// nil interface).
type fakeCore struct {
	Core
	dir   string
	calls []string // "op id path"
}

func (f *fakeCore) OpenFile(_ context.Context, id, path string) (*os.File, error) {
	f.calls = append(f.calls, "open "+id+" "+path)
	return os.Open(filepath.Join(f.dir, path))
}

func (f *fakeCore) WriteFrom(_ context.Context, id, path string, r io.Reader) (int64, error) {
	f.calls = append(f.calls, "write "+id+" "+path)
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	return int64(len(b)), os.WriteFile(filepath.Join(f.dir, path), b, 0o644)
}

// Processes records which sandbox's agent was asked for and answers that
// it is gone.
func (f *fakeCore) Processes(_ context.Context, id string) (*procs.Agent, error) {
	f.calls = append(f.calls, "agent "+id)
	return nil, procs.ErrClosed
}

type sandboxKey struct{}

// newHandler is envd over core for the sandbox a request's context
// holds, as agentapi/e2b's router puts it there.
func newHandler(t *testing.T, core Core) http.Handler {
	t.Helper()
	h, err := New(Config{
		Core: core, MaxUploadBytes: 1 << 20, UploadTimeout: time.Minute,
		Sandbox: func(ctx context.Context) Sandbox { return ctx.Value(sandboxKey{}).(Sandbox) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newServer serves envd over core, for the sandbox "sb", on a test
// server closed at cleanup.
func newServer(t *testing.T, core Core) *httptest.Server {
	t.Helper()
	h := newHandler(t, core)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, Sandbox{ID: "sb"})))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func serve(t *testing.T, h http.Handler, sb Sandbox, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, sb)))
	return w
}

func TestNewRequiresConfig(t *testing.T) {
	if _, err := New(Config{Core: &fakeCore{}, MaxUploadBytes: 1, UploadTimeout: time.Second}); err == nil {
		t.Fatal("New without Sandbox: no error")
	}
}

// TestRequestsReachTheirSandbox: /envs and /files act on the sandbox the
// router named: a workspace path at the workspace path the SDK's path
// maps to, any other through that sandbox's process agent; root's write
// outside the workspace is refused before either is called.
func TestRequestsReachTheirSandbox(t *testing.T) {
	core := &fakeCore{dir: t.TempDir()}
	h := newHandler(t, core)
	a := Sandbox{ID: "sbA", Envs: map[string]string{"WHO": "a"}}

	w := serve(t, h, a, httptest.NewRequest("GET", "/envs", nil))
	var envs map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &envs); err != nil || w.Code != http.StatusOK || envs["WHO"] != "a" || len(envs) != 1 {
		t.Fatalf("GET /envs: %d %s, want 200 {WHO: a}", w.Code, w.Body)
	}

	r := httptest.NewRequest("POST", "/files?path=/home/user/x.txt", strings.NewReader("hello"))
	r.Header.Set("Content-Type", "application/octet-stream")
	w = serve(t, h, a, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"path":"/home/user/x.txt"`) {
		t.Fatalf("upload: %d %s, want 200 naming /home/user/x.txt", w.Code, w.Body)
	}

	w = serve(t, h, a, httptest.NewRequest("GET", "/files?path=/workspace/x.txt", nil))
	if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), []byte("hello")) {
		t.Fatalf("download: %d %q, want 200 %q", w.Code, w.Body, "hello")
	}
	if cd := w.Header().Get("Content-Disposition"); cd != `attachment; filename=x.txt` {
		t.Errorf("download's Content-Disposition = %q", cd)
	}

	w = serve(t, h, a, httptest.NewRequest("GET", "/files?path=/etc/passwd", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("download of /etc/passwd with the agent gone: %d %s, want 503", w.Code, w.Body)
	}

	r = httptest.NewRequest("POST", "/files?path=/tmp/y.txt&username=root", strings.NewReader("hello"))
	r.Header.Set("Content-Type", "application/octet-stream")
	w = serve(t, h, a, r)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not root") {
		t.Fatalf("upload to /tmp as root: %d %s, want 400 saying the API is not root", w.Code, w.Body)
	}
	// The upload asks the agent too, to replace the file's metadata.
	if want := []string{"write sbA x.txt", "agent sbA", "open sbA x.txt", "agent sbA"}; strings.Join(core.calls, ";") != strings.Join(want, ";") {
		t.Errorf("core calls = %q, want %q", core.calls, want)
	}
}
