package e2b

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestCreateNetwork: allowOut is the session's egress policy (a CIDR of
// one address as the address), denyOut and allowPublicTraffic are kept
// and reported by getInfo, and a refused option names its field.
func TestCreateNetwork(t *testing.T) {
	s, core := newTestServer(t)
	sb := create(t, s, keyA, `{"network":{"allowOut":["pypi.org","10.1.2.3/32","api.test:8443"],"denyOut":["0.0.0.0/0"],"allowPublicTraffic":false}}`)
	n := core.network[sb.SandboxID]
	if n == nil || !slices.Equal(n.Allow, []string{"pypi.org", "10.1.2.3", "api.test:8443"}) {
		t.Fatalf("the session's egress policy: %+v", n)
	}
	w := do(t, s, "GET", "/sandboxes/"+sb.SandboxID, "", map[string]string{"X-API-KEY": keyA})
	var info struct {
		Network map[string]any `json:"network"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil || w.Code != http.StatusOK {
		t.Fatalf("getInfo: %d %s", w.Code, w.Body)
	}
	if got, _ := json.Marshal(info.Network); string(got) != `{"allowOut":["pypi.org","10.1.2.3","api.test:8443"],"allowPublicTraffic":false,"denyOut":["0.0.0.0/0"]}` {
		t.Errorf("getInfo's network: %s", got)
	}
	if m := string(core.meta[sb.SandboxID]); !strings.Contains(m, `"network":{"allowOut":["pypi.org"`) {
		t.Errorf("the sandbox's record does not keep its network: %s", m)
	}

	plain := create(t, s, keyA, `{"network":{"denyOut":["8.8.8.8"]}}`)
	if n := core.network[plain.SandboxID]; n != nil {
		t.Errorf("denyOut alone gave the session an egress policy: %+v", n)
	}

	for body, field := range map[string]string{
		`{"network":{"allowOut":["0.0.0.0/0"]}}`:           "network.allowOut[0]",
		`{"network":{"allowOut":["a.test","10.0.0.0/8"]}}`: "network.allowOut[1]",
		`{"network":{"denyOut":[""]}}`:                     "network.denyOut[0]",
		`{"network":{"rules":{"a.test":[{}]}}}`:            "network.rules",
		`{"network":{"egressProxy":{"address":"p:1"}}}`:    "network.egressProxy",
		`{"network":{"maskRequestHost":"a b"}}`:            "network.maskRequestHost",
	} {
		w := do(t, s, "POST", "/sandboxes", body, map[string]string{"X-API-KEY": keyA})
		var e apiError
		if json.Unmarshal(w.Body.Bytes(), &e); w.Code != http.StatusBadRequest || !strings.Contains(e.Message, field) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, w.Code, w.Body, field)
		}
	}
}

// TestPublicTraffic: a sandbox created with allowPublicTraffic: true
// serves its own servers without credentials, and only those (envd and
// the code interpreter still ask for its tokens); another sandbox's stay
// closed; maskRequestHost is the Host its servers see.
func TestPublicTraffic(t *testing.T) {
	s, pc := newPortServer(t)
	open := create(t, s, keyA, `{"network":{"allowPublicTraffic":true,"maskRequestHost":"custom-host.example.com:${PORT}"}}`)
	closed := create(t, s, keyA, `{"network":{"allowPublicTraffic":false}}`)
	get := func(port, id, path string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest("GET", "http://"+port+"-"+id+".localhost:49999"+path, nil)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	if w := get("8000", open.SandboxID, "/x"); w.Code != http.StatusOK || w.Body.String() != "served /x" {
		t.Fatalf("a public sandbox's server without credentials: %d %s", w.Code, w.Body)
	}
	pc.mu.Lock()
	if n := len(pc.seen); n != 1 || pc.seen[0].Host != "custom-host.example.com:8000" {
		t.Errorf("the server saw %d requests, Host %q; want the mask's", n, pc.seen[n-1].Host)
	}
	pc.mu.Unlock()
	for _, port := range []string{"49983", "49999"} {
		if w := get(port, open.SandboxID, "/health"); w.Code != http.StatusUnauthorized {
			t.Errorf("port %s of a public sandbox without credentials: %d %s, want 401", port, w.Code, w.Body)
		}
	}
	if w := get("8000", closed.SandboxID, "/x"); w.Code != http.StatusUnauthorized {
		t.Errorf("allowPublicTraffic false, without credentials: %d %s, want 401", w.Code, w.Body)
	}
	if w := do(t, s, "DELETE", "/sandboxes/"+open.SandboxID, "", map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusNoContent {
		t.Fatalf("kill: %d %s", w.Code, w.Body)
	}
	if w := get("8000", open.SandboxID, "/x"); w.Code != http.StatusUnauthorized {
		t.Errorf("a killed public sandbox without credentials: %d %s, want the unknown id's 401", w.Code, w.Body)
	}
}

// TestUpdateNetwork: updateNetwork replaces denyOut (kept and reported);
// an update that would change what gets out is refused, naming allowOut,
// and changes nothing; only the creator's key reaches it.
func TestUpdateNetwork(t *testing.T) {
	s, _ := newTestServer(t)
	sb := create(t, s, keyA, `{"network":{"allowOut":["pypi.org"],"allowPublicTraffic":true}}`)
	put := func(key, body string) *httptest.ResponseRecorder {
		return do(t, s, "PUT", "/sandboxes/"+sb.SandboxID+"/network", body, map[string]string{"X-API-KEY": key})
	}
	network := func() string {
		w := do(t, s, "GET", "/sandboxes/"+sb.SandboxID, "", map[string]string{"X-API-KEY": keyA})
		var info struct {
			Network json.RawMessage `json:"network"`
		}
		json.Unmarshal(w.Body.Bytes(), &info)
		return string(info.Network)
	}
	if w := put(keyA, `{"allowOut":["pypi.org"],"denyOut":["8.8.8.8"]}`); w.Code != http.StatusNoContent {
		t.Fatalf("update: %d %s", w.Code, w.Body)
	}
	want := `{"allowOut":["pypi.org"],"denyOut":["8.8.8.8"],"allowPublicTraffic":true}`
	if got := network(); got != want {
		t.Errorf("after the update: %s, want %s", got, want)
	}
	for body, field := range map[string]string{`{}`: "allowOut", `{"allowOut":["pypi.org","files.test"]}`: "allowOut", `{"allowOut":["pypi.org"],"denyOut":["-"]}`: "network.denyOut[0]"} {
		w := put(keyA, body)
		var e apiError
		if json.Unmarshal(w.Body.Bytes(), &e); w.Code != http.StatusBadRequest || !strings.Contains(e.Message, field) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, w.Code, w.Body, field)
		}
	}
	if got := network(); got != want {
		t.Errorf("after refused updates: %s, want it unchanged (%s)", got, want)
	}
	if w := put(keyB, `{"allowOut":["pypi.org"]}`); w.Code != http.StatusNotFound {
		t.Errorf("another key: %d %s, want 404", w.Code, w.Body)
	}

	plain := create(t, s, keyA, `{}`)
	if w := do(t, s, "PUT", "/sandboxes/"+plain.SandboxID+"/network", `{"denyOut":["8.8.8.8"]}`, map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusNoContent {
		t.Errorf("denyOut on a sandbox with no egress: %d %s", w.Code, w.Body)
	}
}
