package e2b

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/daemon/ports"
)

// portCore is the fake core with a sandbox server on port 8000: a local
// test server that records what it was sent.
type portCore struct {
	*fakeCore
	srv  *httptest.Server
	mu   sync.Mutex
	seen []*http.Request
}

func (p *portCore) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if port != 8000 {
		return nil, fmt.Errorf("session %s: port %d: %w", id, port, ports.ErrNoListener)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.srv.Listener.Addr().String())
}

func newPortServer(t *testing.T) (*Server, *portCore) {
	t.Helper()
	keys, err := NewKeys([]string{keyA, keyB})
	if err != nil {
		t.Fatal(err)
	}
	pc := &portCore{fakeCore: newFakeCore()}
	pc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pc.mu.Lock()
		pc.seen = append(pc.seen, r)
		pc.mu.Unlock()
		fmt.Fprintf(w, "served %s", r.URL.RequestURI())
	}))
	t.Cleanup(pc.srv.Close)
	s, err := New(Config{Core: pc, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return s, pc
}

// TestHostPorts: getHost's PORT-ID.DOMAIN reaches the sandbox's server
// with the sandbox's traffic token, access token or key, and with the
// request's Host; the credentials are not passed to the server; a closed
// port is E2B's 502 naming it; without credentials (or with a signed
// files URL, which is envd's) the answer is the unknown id's 401.
func TestHostPorts(t *testing.T) {
	s, pc := newPortServer(t)
	sb := create(t, s, keyA, `{}`)
	host := "8000-" + sb.SandboxID + ".localhost:49999"
	get := func(path string, hdr map[string]string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest("GET", "http://"+host+path, nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	for _, cred := range []map[string]string{
		{"E2B-Traffic-Access-Token": sb.TrafficAccessToken},
		{"X-Access-Token": sb.EnvdAccessToken},
		{"X-API-KEY": keyA},
	} {
		w := get("/a/b?c=d", cred)
		if w.Code != http.StatusOK || w.Body.String() != "served /a/b?c=d" {
			t.Errorf("%v: %d %q", cred, w.Code, w.Body)
		}
	}
	pc.mu.Lock()
	for _, r := range pc.seen {
		if r.Host != host {
			t.Errorf("the server saw Host %q, want %q", r.Host, host)
		}
		for _, h := range []string{"X-API-KEY", "X-Access-Token", "E2B-Traffic-Access-Token"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("the sandbox's server was sent %s: %q", h, v)
			}
		}
	}
	pc.mu.Unlock()

	w := get("/", map[string]string{"E2B-Traffic-Access-Token": sb.TrafficAccessToken})
	if w.Code != http.StatusOK {
		t.Errorf("/: %d", w.Code)
	}
	host = "3000-" + sb.SandboxID + ".localhost"
	w = get("/", map[string]string{"E2B-Traffic-Access-Token": sb.TrafficAccessToken})
	var a struct {
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
		Port      int    `json:"port"`
		Code      int    `json:"code"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || w.Code != http.StatusBadGateway || a.Code != 502 ||
		a.Port != 3000 || a.SandboxID != sb.SandboxID || !strings.Contains(a.Message, "port 3000") {
		t.Errorf("a closed port: %d %s", w.Code, w.Body)
	}

	host = "8000-" + sb.SandboxID + ".localhost"
	unknown := strings.ReplaceAll(unknownBody(t, s, "8000"), "0123456789abcdef0123456789abcdef", sb.SandboxID)
	raw := sha256.Sum256([]byte("/a:read::" + sb.EnvdAccessToken))
	sig := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(raw[:]), "=")
	for name, path := range map[string]string{"none": "/", "envd's signed URL": "/files?path=/a&signature=" + sig} {
		if w := get(path, nil); w.Code != http.StatusUnauthorized || w.Body.String() != unknown {
			t.Errorf("%s: %d %s, want the unknown id's 401", name, w.Code, w.Body)
		}
	}
	if w := get("/", map[string]string{"X-API-KEY": keyB}); w.Code != http.StatusUnauthorized {
		t.Errorf("another key: %d %s", w.Code, w.Body)
	}
}
