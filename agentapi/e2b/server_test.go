package e2b

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/apikeys"
	"github.com/nsbox/nsbox/agentapi/e2b/hostports"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/sessions"
)

// fakeCore keeps sessions in a map; what a test does not use panics (the
// embedded nil interface).
type fakeCore struct {
	Core
	mu       sync.Mutex
	sessions map[string]*agentapi.Session
	lifetime map[string]time.Duration
	meta     map[string]json.RawMessage
	network  map[string]*agentapi.Network // each session's egress policy
}

func newFakeCore() *fakeCore {
	return &fakeCore{sessions: map[string]*agentapi.Session{}, lifetime: map[string]time.Duration{}, meta: map[string]json.RawMessage{}, network: map[string]*agentapi.Network{}}
}

// Processes: the fake's sessions have no process agent, as a sandbox
// that is ending has none (file metadata is then neither set nor read).
func (f *fakeCore) Processes(context.Context, string) (*procs.Agent, error) {
	return nil, errdefs.New(errdefs.ErrUnavailable, "the fake core's sessions have no process agent")
}

// Snapshots: none (agentapi/e2b/snapshots tests them).
func (f *fakeCore) Snapshots(context.Context) []sessions.Snapshot { return nil }

func (f *fakeCore) Info(context.Context) (*agentapi.Info, error) {
	return &agentapi.Info{Rootfs: []string{"default", "minimal"}, DefaultRootfs: "default",
		DefaultLimits: agentapi.Limits{CPUs: 1, MemoryBytes: 512 << 20, DiskBytes: 256 << 20},
		MaxLimits:     agentapi.Limits{TimeoutMs: 600_000},
		Profiles:      []agentapi.Profile{{Name: "strict", Limits: agentapi.Limits{CPUs: 0.5, MemoryBytes: 128 << 20}}}}, nil
}

func (f *fakeCore) CreateSessionWith(_ context.Context, req *agentapi.SessionRequest, so daemon.SessionOptions) (*agentapi.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !so.Processes || !so.NoIdleEnd || len(so.ID) != 32 {
		return nil, errdefs.Field("", "an E2B sandbox needs processes, no idle end and a 128-bit id: %+v", so)
	}
	now := time.Now()
	rfs := req.Rootfs
	if rfs == "" {
		rfs = "default"
	}
	s := &agentapi.Session{ID: so.ID, Rootfs: rfs, State: agentapi.SessionIdle, CreatedAt: now,
		ExpiresAt: now.Add(time.Duration(req.LifetimeMs) * time.Millisecond), Limits: *req.Limits, LifetimeAction: req.LifetimeAction}
	f.sessions[s.ID] = s
	f.network[s.ID] = req.Network
	return s, nil
}

func (f *fakeCore) Session(_ context.Context, id string) (*agentapi.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return nil, errdefs.New(errdefs.ErrNotFound, "session "+id+" not found")
	}
	c := *s
	return &c, nil
}

func (f *fakeCore) DeleteSession(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sessions[id]; !ok {
		return errdefs.New(errdefs.ErrNotFound, "session "+id+" not found")
	}
	delete(f.sessions, id)
	delete(f.meta, id)
	return nil
}

func (f *fakeCore) SetSessionLifetime(ctx context.Context, id string, d time.Duration) (*agentapi.Session, error) {
	f.mu.Lock()
	f.lifetime[id] = d
	if sess := f.sessions[id]; sess != nil {
		sess.ExpiresAt = time.Now().Add(d)
	}
	f.mu.Unlock()
	return f.Session(ctx, id)
}

func (f *fakeCore) ListDir(context.Context, string, string, int) ([]agentapi.WorkspaceFile, error) {
	return []agentapi.WorkspaceFile{{Path: "a.txt", Size: 1}}, nil
}

// keyA and keyB are two API keys of the endpoint.
const (
	keyA = "e2b_00112233445566778899aabbccddeeff"
	keyB = "e2b_ffeeddccbbaa99887766554433221100"
)

func newTestServer(t *testing.T) (*Server, *fakeCore) {
	t.Helper()
	keys, err := NewKeys([]string{keyA, keyB})
	if err != nil {
		t.Fatal(err)
	}
	core := newFakeCore()
	s, err := New(Config{Core: core, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return s, core
}

// do sends one request to s and returns the recorder.
func do(t *testing.T, s *Server, method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func create(t *testing.T, s *Server, key, body string) sandboxJSON {
	t.Helper()
	w := do(t, s, "POST", "/v2/sandboxes", body, map[string]string{"X-API-KEY": key})
	if w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	var sb sandboxJSON
	if err := json.Unmarshal(w.Body.Bytes(), &sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestControlPlaneAuth(t *testing.T) {
	s, _ := newTestServer(t)
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no key", nil, http.StatusUnauthorized},
		{"wrong key", map[string]string{"X-API-KEY": "e2b_0000000000000000000000000000dead"}, http.StatusUnauthorized},
		{"a key's prefix", map[string]string{"X-API-KEY": keyA[:20]}, http.StatusUnauthorized},
		{"a browser page", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"a valid key", map[string]string{"X-API-KEY": keyA}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := do(t, s, "GET", "/v2/sandboxes", "", tc.hdr); w.Code != tc.want {
				t.Fatalf("GET /v2/sandboxes: %d %s, want %d", w.Code, w.Body, tc.want)
			}
		})
	}
}

func TestSandboxesBelongToTheirKey(t *testing.T) {
	s, _ := newTestServer(t)
	a := create(t, s, keyA, `{"templateID":"base","metadata":{"who":"a"}}`)
	if a.EnvdAccessToken == "" || a.TrafficAccessToken == "" || a.EnvdAccessToken == a.TrafficAccessToken {
		t.Fatalf("tokens: %q %q", a.EnvdAccessToken, a.TrafficAccessToken)
	}
	for _, p := range []struct{ method, path string }{
		{"GET", "/sandboxes/" + a.SandboxID}, {"DELETE", "/sandboxes/" + a.SandboxID},
		{"POST", "/sandboxes/" + a.SandboxID + "/timeout"}, {"POST", "/v2/sandboxes/" + a.SandboxID + "/connect"},
		{"GET", "/sandboxes/" + a.SandboxID + "/metrics"}, {"POST", "/sandboxes/" + a.SandboxID + "/pause"},
	} {
		if w := do(t, s, p.method, p.path, `{"timeout":10}`, map[string]string{"X-API-KEY": keyB}); w.Code != http.StatusNotFound {
			t.Errorf("%s %s with another key: %d %s, want 404", p.method, p.path, w.Code, w.Body)
		}
	}
	w := do(t, s, "GET", "/v2/sandboxes", "", map[string]string{"X-API-KEY": keyB})
	if strings.Contains(w.Body.String(), a.SandboxID) {
		t.Fatalf("key B lists key A's sandbox: %s", w.Body)
	}
	w = do(t, s, "GET", "/sandboxes/"+a.SandboxID, "", map[string]string{"X-API-KEY": keyA})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"who":"a"`) {
		t.Fatalf("key A's own sandbox: %d %s", w.Code, w.Body)
	}
}

func TestSandboxRoutes(t *testing.T) {
	s, core := newTestServer(t)
	a := create(t, s, keyA, `{}`)
	b := create(t, s, keyB, `{}`)
	envd := func(id, token string) map[string]string {
		return map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983", "X-Access-Token": token}
	}
	list := "/filesystem.Filesystem/ListDir"
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		host string
		want int
	}{
		{"its token", envd(a.SandboxID, a.EnvdAccessToken), "", http.StatusOK},
		{"the Host form", map[string]string{"X-Access-Token": a.EnvdAccessToken}, "49983-" + a.SandboxID + ".nsbox.local:1234", http.StatusOK},
		{"another sandbox's token", envd(a.SandboxID, b.EnvdAccessToken), "", http.StatusUnauthorized},
		{"its traffic token on envd", map[string]string{"E2b-Sandbox-Id": a.SandboxID, "E2b-Sandbox-Port": "49983", "E2B-Traffic-Access-Token": a.TrafficAccessToken}, "", http.StatusOK},
		{"no token", envd(a.SandboxID, ""), "", http.StatusUnauthorized},
		{"its creator's key", map[string]string{"E2b-Sandbox-Id": a.SandboxID, "E2b-Sandbox-Port": "49983", "X-API-KEY": keyA}, "", http.StatusOK},
		{"another key", map[string]string{"E2b-Sandbox-Id": a.SandboxID, "E2b-Sandbox-Port": "49983", "X-API-KEY": keyB}, "", http.StatusUnauthorized},
		{"an unknown sandbox", envd("0123456789abcdef0123456789abcdef", a.EnvdAccessToken), "", http.StatusUnauthorized},
		{"not a TCP port", map[string]string{"E2b-Sandbox-Id": a.SandboxID, "E2b-Sandbox-Port": "70000", "X-Access-Token": a.EnvdAccessToken}, "", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", list, strings.NewReader(`{"path":"/home/user"}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Connect-Protocol-Version", "1")
			if tc.host != "" {
				r.Host = tc.host
			}
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.want)
			}
			if w.Code == http.StatusOK && !strings.Contains(w.Body.String(), `"/home/user/a.txt"`) {
				t.Fatalf("ListDir answered %s", w.Body)
			}
		})
	}
	// A sandbox whose session ended is gone from every plane.
	if err := core.DeleteSession(context.Background(), a.SandboxID); err != nil {
		t.Fatal(err)
	}
	if w := do(t, s, "GET", "/health", "", envd(a.SandboxID, a.EnvdAccessToken)); w.Code != http.StatusBadGateway {
		t.Fatalf("health of an ended sandbox: %d, want 502", w.Code)
	}
	if w := do(t, s, "GET", "/sandboxes/"+a.SandboxID, "", map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusNotFound {
		t.Fatalf("GET an ended sandbox: %d, want 404", w.Code)
	}
}

func TestCreate(t *testing.T) {
	s, core := newTestServer(t)
	for _, tc := range []struct {
		name, body string
		want       int
		rootfs     string
	}{
		{"default template", `{"templateID":"base"}`, http.StatusCreated, "default"},
		{"the interpreter's", `{"templateID":"code-interpreter-v1","timeout":30}`, http.StatusCreated, "default"},
		{"a rootfs", `{"templateID":"minimal"}`, http.StatusCreated, "minimal"},
		{"a profile", `{"templateID":"strict"}`, http.StatusCreated, "default"},
		{"unknown template", `{"templateID":"ubuntu"}`, http.StatusNotFound, ""},
		{"a negative timeout", `{"timeout":-1}`, http.StatusBadRequest, ""},
		{"autoPause", `{"autoPause":true}`, http.StatusCreated, "default"},
		{"autoResume", `{"autoPause":true,"autoResume":{"enabled":true}}`, http.StatusBadRequest, ""},
		{"autoResume off", `{"autoPause":true,"autoResume":{"enabled":false}}`, http.StatusCreated, "default"},
		{"network: allowOut", `{"network":{"allowOut":["1.1.1.1"]}}`, http.StatusCreated, "default"},
		{"network: deny all", `{"network":{"denyOut":["0.0.0.0/0"],"allowPublicTraffic":false}}`, http.StatusCreated, "default"},
		{"network: allow all", `{"network":{"allowOut":["0.0.0.0/0"]}}`, http.StatusBadRequest, ""},
		{"network: transforms", `{"network":{"rules":{"api.test":[{"transform":{"headers":{"A":"b"}}}]}}}`, http.StatusBadRequest, ""},
		{"network: no transforms", `{"network":{"rules":{ }}}`, http.StatusCreated, "default"},
		{"network: a proxy", `{"network":{"egressProxy":{"address":"p.test:1080"}}}`, http.StatusBadRequest, ""},
		{"network: not a host", `{"network":{"denyOut":["a b"]}}`, http.StatusBadRequest, ""},
		{"network: a bad mask", `{"network":{"maskRequestHost":"a/b"}}`, http.StatusBadRequest, ""},
		{"bad JSON", `{"timeout":`, http.StatusBadRequest, ""},
		{"a lone surrogate", `{"metadata":{"k":"\udc00"}}`, http.StatusBadRequest, ""},
		{"a surrogate pair", `{"metadata":{"k":"\ud83d\ude00"}}`, http.StatusCreated, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, s, "POST", "/v2/sandboxes", tc.body, map[string]string{"X-API-KEY": keyA})
			if w.Code != tc.want {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.want)
			}
			var e apiError
			if w.Code != http.StatusCreated {
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Code != tc.want || e.Message == "" {
					t.Fatalf("error body %s: the SDKs read code and message", w.Body)
				}
				return
			}
			var sb sandboxJSON
			_ = json.Unmarshal(w.Body.Bytes(), &sb)
			sess, _ := core.Session(context.Background(), sb.SandboxID)
			if sess.Rootfs != tc.rootfs || sess.Limits.TimeoutMs != 600_000 {
				t.Fatalf("session %+v", sess)
			}
			if want := map[bool]string{true: "park"}[strings.Contains(tc.body, `"autoPause":true`)]; sess.LifetimeAction != want {
				t.Fatalf("lifetime_action %q, want %q (onTimeout \"pause\" parks at the timeout)", sess.LifetimeAction, want)
			}
			if tc.name == "a profile" && sess.Limits.MemoryBytes != 128<<20 {
				t.Fatalf("the profile's limits were not applied: %+v", sess.Limits)
			}
		})
	}
}

// TestCreateRecordTooLarge: metadata and envs a sandbox's record could not
// keep are refused before a session is made for them (a 60 MiB metadata
// once cost a spawn, then a refusal).
func TestCreateRecordTooLarge(t *testing.T) {
	s, core := newTestServer(t)
	big := strings.Repeat("x", 200<<10)
	for _, body := range []string{
		`{"metadata":{"a":"` + big + `","b":"` + big + `"}}`,
		`{"metadata":{"a":"` + big + `"},"envVars":{"B":"` + big + `"}}`,
	} {
		w := do(t, s, "POST", "/v2/sandboxes", body, map[string]string{"X-API-KEY": keyA})
		var e apiError
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusBadRequest || !strings.Contains(e.Message, "metadata") {
			t.Fatalf("%d %.200s, want 400 naming metadata", w.Code, w.Body)
		}
	}
	core.mu.Lock()
	defer core.mu.Unlock()
	if len(core.sessions) != 0 {
		t.Fatalf("%d sessions made for refused sandboxes", len(core.sessions))
	}
}

// TestLoneSurrogate: E2B's lenient decoder refuses a lone surrogate escape
// as /v1's does, naming the field (encoding/json alone would store U+FFFD).
func TestLoneSurrogate(t *testing.T) {
	s, _ := newTestServer(t)
	w := do(t, s, "POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"user":"\ud800x"}}`, map[string]string{"X-API-KEY": keyA})
	var e apiError
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusBadRequest || !strings.Contains(e.Message, "metadata.user: a lone UTF-16 surrogate") {
		t.Fatalf("%d %s, want 400 naming metadata.user", w.Code, w.Body)
	}
}

func TestTimeout(t *testing.T) {
	s, core := newTestServer(t)
	a := create(t, s, keyA, `{}`)
	if w := do(t, s, "POST", "/sandboxes/"+a.SandboxID+"/timeout", `{"timeout":42}`, map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusNoContent {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := core.lifetime[a.SandboxID]; got != 42*time.Second {
		t.Fatalf("lifetime %v, want 42s", got)
	}
	if w := do(t, s, "POST", "/sandboxes/"+a.SandboxID+"/timeout", `{}`, map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusBadRequest {
		t.Fatalf("no timeout: %d, want 400", w.Code)
	}
}

func TestListFilters(t *testing.T) {
	s, _ := newTestServer(t)
	x := create(t, s, keyA, `{"metadata":{"run":"r1","tag":"a b"}}`)
	create(t, s, keyA, `{"metadata":{"run":"r2"}}`)
	// What the SDK sends: each key and value encoded, then the pairs,
	// then the query parameter.
	inner := url.Values{url.QueryEscape("run"): {url.QueryEscape("r1")}, url.QueryEscape("tag"): {url.QueryEscape("a b")}}.Encode()
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", 2},
		{"?metadata=" + url.QueryEscape(inner), 1},
		{"?metadata=" + url.QueryEscape("run=nope"), 0},
		{"?state=running", 2},
		{"?state=paused", 0},
		{"?state=running,paused", 2},
	} {
		w := do(t, s, "GET", "/v2/sandboxes"+tc.query, "", map[string]string{"X-API-KEY": keyA})
		var got []sandboxJSON
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %s", tc.query, w.Body)
		}
		if len(got) != tc.want {
			t.Errorf("list%s: %d sandboxes, want %d: %s", tc.query, len(got), tc.want, w.Body)
		}
		if tc.want == 1 && got[0].SandboxID != x.SandboxID {
			t.Errorf("list%s: %s", tc.query, got[0].SandboxID)
		}
	}
}

func TestHostRoute(t *testing.T) {
	for _, tc := range []struct{ host, port, id string }{
		{"49983-abc.example.com", "49983", "abc"},
		{"49999-abc.localhost:3000", "49999", "abc"},
		{"127.0.0.1:49999", "", ""},
		{"localhost", "", ""},
		{"api.e2b.dev", "", ""},
		{"x9-abc.example.com", "", ""},
		{"-abc.example.com", "", ""},
		{"49983-.example.com", "", ""},
	} {
		if port, id := hostports.Route(tc.host); port != tc.port || id != tc.id {
			t.Errorf("Route(%q) = %q, %q; want %q, %q", tc.host, port, id, tc.port, tc.id)
		}
	}
}

func TestSignedURL(t *testing.T) {
	sb := &sandbox{token: "tok"}
	sign := func(raw string) string {
		sum := sha256.Sum256([]byte(raw))
		return url.QueryEscape("v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "="))
	}
	now := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name, method, query string
		want                bool
	}{
		{"read", "GET", "path=/home/user/a&username=user&signature=" + sign("/home/user/a:read:user:tok"), true},
		{"write", "POST", "path=/home/user/a&signature=" + sign("/home/user/a:write::tok"), true},
		{"a read signature used to write", "POST", "path=/home/user/a&username=user&signature=" + sign("/home/user/a:read:user:tok"), false},
		{"another path", "GET", "path=/home/user/b&username=user&signature=" + sign("/home/user/a:read:user:tok"), false},
		{"not expired", "GET", "path=/a&signature_expiration=1000010&signature=" + sign("/a:read::tok:1000010"), true},
		{"expired", "GET", "path=/a&signature_expiration=999999&signature=" + sign("/a:read::tok:999999"), false},
		{"another token", "GET", "path=/a&signature=" + sign("/a:read::other"), false},
		{"none", "GET", "path=/a", false},
	} {
		r := httptest.NewRequest(tc.method, "/files?"+tc.query, nil)
		if signed, expired := apikeys.SignedURL(r, sb.token, now); (signed && !expired) != tc.want {
			t.Errorf("%s: signed %v, expired %v; want valid %v", tc.name, signed, expired, tc.want)
		}
	}
}

func TestLoadKeys(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the keys file must be owned by root")
	}
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# the agents' key\n"+keyA+"\n\n"+keyB+"\n", 0o600)
	k, err := LoadKeys(good)
	if err != nil || k.Match(keyA) != 0 || k.Match(keyB) != 1 || k.Match("e2b_nope") != -1 {
		t.Fatalf("LoadKeys: %v", err)
	}
	for _, tc := range []struct{ name, content, want string }{
		{"readable by others", keyA, "chmod 600"},
		{"not a key", "secret", "e2b_"},
		{"empty", "# nothing\n", "no API keys"},
	} {
		mode := os.FileMode(0o600)
		if tc.name == "readable by others" {
			mode = 0o644
		}
		if _, err := LoadKeys(write(tc.name, tc.content, mode)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	p := write("owned", keyA, 0o600)
	if err := os.Chown(p, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(p); err == nil || !strings.Contains(err.Error(), "owned by root") {
		t.Errorf("a key file owned by uid 1000: %v", err)
	}
}

// TestExpiredSignedURL: a /files URL the sandbox's token signed whose
// expiration passed is envd's 401 "signature is already expired", on
// E2B_SANDBOX_URL (no routing headers: the signature names the sandbox)
// as with the routing headers; a signature the token did not make is
// still refused as having no credentials.
func TestExpiredSignedURL(t *testing.T) {
	s, _ := newTestServer(t)
	a := create(t, s, keyA, `{}`)
	sign := func(raw string) string {
		sum := sha256.Sum256([]byte(raw))
		return url.QueryEscape("v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "="))
	}
	past := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	expired := "/files?path=hello.txt&signature_expiration=" + past + "&signature=" + sign("hello.txt:read::"+a.EnvdAccessToken+":"+past)
	forged := "/files?path=hello.txt&signature_expiration=" + past + "&signature=" + sign("hello.txt:read::nottoken:"+past)
	routed := map[string]string{"E2b-Sandbox-Id": a.SandboxID, "E2b-Sandbox-Port": "49983"}
	for _, tc := range []struct {
		name, target string
		hdr          map[string]string
		want         string
	}{
		{"expired, on the sandbox URL", expired, nil, "signature is already expired"},
		{"expired, routed", expired, routed, "signature is already expired"},
		{"forged, on the sandbox URL", forged, nil, "missing or unknown X-API-KEY"},
		{"forged, routed", forged, routed, "missing or wrong X-Access-Token"},
	} {
		w := do(t, s, "GET", tc.target, "", tc.hdr)
		var body apiError
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %d %q: %v", tc.name, w.Code, w.Body, err)
		}
		if w.Code != http.StatusUnauthorized || body.Code != http.StatusUnauthorized || !strings.Contains(body.Message, tc.want) {
			t.Errorf("%s: %d %+v, want 401 %q", tc.name, w.Code, body, tc.want)
		}
		if strings.HasPrefix(tc.want, "signature") && body.Message != tc.want {
			t.Errorf("%s: message %q, want exactly %q (the SDK compares the body)", tc.name, body.Message, tc.want)
		}
	}
}

// TestTemplateAlias: Template.exists's GET /templates/aliases/{alias}
// knows the names Sandbox.create takes, and only those.
func TestTemplateAlias(t *testing.T) {
	s, _ := newTestServer(t)
	for name, want := range map[string]int{"base": 200, "code-interpreter-v1": 200, "minimal": 200, "strict": 200, "nonexistent-1": 404} {
		w := do(t, s, "GET", "/templates/aliases/"+name, "", map[string]string{"X-API-KEY": keyA})
		if w.Code != want {
			t.Errorf("%s: %d %s, want %d", name, w.Code, w.Body, want)
		}
		if want == 200 && !strings.Contains(w.Body.String(), `"templateID":"`+name+`"`) {
			t.Errorf("%s: %s", name, w.Body)
		}
	}
	if w := do(t, s, "GET", "/templates/aliases/base", "", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("without a key: %d", w.Code)
	}
}
