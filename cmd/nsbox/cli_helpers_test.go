package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// runApp runs `nsbox ARGS` in this process as main does, with stdin
// reading in (a string or an *os.File), and returns what it printed and
// its exit status. Tests that use it must not run in parallel: it swaps
// os.Stdin, os.Stdout and os.Stderr.
func runApp(t *testing.T, in any, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	dir := t.TempDir()
	stdin, ok := in.(*os.File)
	if !ok {
		p := filepath.Join(dir, "stdin")
		s, _ := in.(string)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		stdin = f
	}
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	saved := [3]*os.File{os.Stdin, os.Stdout, os.Stderr}
	os.Stdin, os.Stdout, os.Stderr = stdin, outF, errF
	err = run(append([]string{"nsbox"}, args...))
	os.Stdin, os.Stdout, os.Stderr = saved[0], saved[1], saved[2]
	if err != nil {
		if msg := err.Error(); msg != "" {
			errF.WriteString("nsbox: " + msg + "\n")
		}
		code = exitCode(err)
	}
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return string(o), string(e), code
}

// fakeDaemon serves h on a temp Unix socket as the daemon's API would
// (GET /v1/health answers ok) and returns the socket's path.
func fakeDaemon(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, agentapi.Health{Status: "ok", APIVersion: agentapi.Version})
	})
	mux.HandleFunc("/", h)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", agentapi.ContentTypeJSON)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, agentapi.ErrorBody{Error: &agentapi.Error{Code: code, Message: msg}})
}

// writeStream answers a streaming request: the events, one per line.
func writeStream(w http.ResponseWriter, evs ...agentapi.Event) {
	w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
	enc := json.NewEncoder(w)
	for _, ev := range evs {
		enc.Encode(ev)
	}
}

// requestLog records the requests a fake daemon got.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD PATH"
	body [][]byte
}

func (l *requestLog) add(r *http.Request, body []byte) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
	l.body = append(l.body, body)
	return len(l.reqs)
}

func (l *requestLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }
