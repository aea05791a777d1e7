package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

func (f *fakeCore) ParkSession(_ context.Context, id string) (*agentapi.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	switch {
	case !ok:
		return nil, errdefs.New(errdefs.ErrNotFound, "session "+id+" not found")
	case s.State == agentapi.SessionParked:
		return nil, errdefs.New(errdefs.ErrSessionParked, "session "+id+" is parked")
	case s.State == agentapi.SessionBusy:
		return nil, errdefs.New(errdefs.ErrSessionBusy, "session "+id+" is busy")
	}
	s.State = agentapi.SessionParked
	c := *s
	return &c, nil
}

func (f *fakeCore) ReviveSession(_ context.Context, id string) (*agentapi.CarriedSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return nil, errdefs.New(errdefs.ErrNotFound, "session "+id+" not found")
	}
	s.State = agentapi.SessionIdle
	return &agentapi.CarriedSession{Session: *s}, nil
}

// state is the sandbox's state as GET /sandboxes/{id} answers it.
func state(t *testing.T, s *Server, key, id string) string {
	t.Helper()
	w := do(t, s, "GET", "/sandboxes/"+id, "", map[string]string{"X-API-KEY": key})
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", id, w.Code, w.Body)
	}
	var sb sandboxJSON
	if err := json.Unmarshal(w.Body.Bytes(), &sb); err != nil {
		t.Fatal(err)
	}
	return sb.State
}

func TestPauseResume(t *testing.T) {
	s, core := newTestServer(t)
	a := create(t, s, keyA, `{}`)
	id := a.SandboxID
	api := func(key string) map[string]string { return map[string]string{"X-API-KEY": key} }
	envd := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983", "X-Access-Token": a.EnvdAccessToken}

	for _, tc := range []struct {
		name, method, path, body, key string
		want                          int
		state                         string // after, "" to skip
	}{
		{"another key's pause", "POST", "/sandboxes/" + id + "/pause", "", keyB, http.StatusNotFound, "running"},
		{"an unknown sandbox's pause", "POST", "/sandboxes/0123456789abcdef0123456789abcdef/pause", "", keyA, http.StatusNotFound, "running"},
		{"legacy resume of a running one", "POST", "/sandboxes/" + id + "/resume", `{}`, keyA, http.StatusConflict, "running"},
		{"pause", "POST", "/sandboxes/" + id + "/pause", `{"memory":true}`, keyA, http.StatusNoContent, "paused"},
		{"pause again: already paused", "POST", "/sandboxes/" + id + "/pause", "", keyA, http.StatusConflict, "paused"},
		{"another key's connect", "POST", "/v2/sandboxes/" + id + "/connect", `{"timeout":60}`, keyB, http.StatusNotFound, "paused"},
		{"another key's legacy resume", "POST", "/sandboxes/" + id + "/resume", `{}`, keyB, http.StatusNotFound, "paused"},
		{"a files-only resume", "POST", "/v2/sandboxes/" + id + "/connect", `{"memory":false}`, keyA, http.StatusBadRequest, "paused"},
		{"a zero timeout", "POST", "/v2/sandboxes/" + id + "/connect", `{"timeout":0}`, keyA, http.StatusBadRequest, "paused"},
		{"connect resumes", "POST", "/v2/sandboxes/" + id + "/connect", `{"timeout":77}`, keyA, http.StatusCreated, "running"},
		{"connect to a running one", "POST", "/v2/sandboxes/" + id + "/connect", `{}`, keyA, http.StatusOK, "running"},
		{"pause for the legacy resume", "POST", "/sandboxes/" + id + "/pause", "", keyA, http.StatusNoContent, "paused"},
		{"legacy resume", "POST", "/sandboxes/" + id + "/resume", `{"timeout":33}`, keyA, http.StatusCreated, "running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, s, tc.method, tc.path, tc.body, api(tc.key))
			if w.Code != tc.want {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.want)
			}
			if got := state(t, s, keyA, id); got != tc.state {
				t.Fatalf("state %q, want %q", got, tc.state)
			}
			if tc.state == "paused" {
				// The sandbox's planes answer as E2B's proxy does
				// for one that is not running, and do not resume it.
				if w := do(t, s, "GET", "/health", "", envd); w.Code != http.StatusBadGateway {
					t.Fatalf("health of a paused sandbox: %d, want 502", w.Code)
				}
			} else if w := do(t, s, "GET", "/health", "", envd); w.Code != http.StatusNoContent {
				t.Fatalf("health of a running sandbox: %d, want 204", w.Code)
			}
		})
	}
	if got := core.lifetime[id]; got != 33*time.Second {
		t.Fatalf("lifetime after the legacy resume %v, want 33s", got)
	}

	// A connect to a running sandbox only extends its timeout (E2B's
	// KeepAliveFor, allowShorter false): a shorter one keeps its end.
	if w := do(t, s, "POST", "/v2/sandboxes/"+id+"/connect", `{"timeout":5}`, api(keyA)); w.Code != http.StatusOK {
		t.Fatalf("connect with a shorter timeout: %d %s", w.Code, w.Body)
	}
	if got := core.lifetime[id]; got != 33*time.Second {
		t.Fatalf("lifetime after a connect with a shorter timeout %v, want 33s kept", got)
	}
	if w := do(t, s, "POST", "/v2/sandboxes/"+id+"/connect", `{"timeout":600}`, api(keyA)); w.Code != http.StatusOK {
		t.Fatalf("connect with a longer timeout: %d %s", w.Code, w.Body)
	}
	if got := core.lifetime[id]; got != 600*time.Second {
		t.Fatalf("lifetime after a connect with a longer timeout %v, want 600s", got)
	}
	// /timeout sets it either way.
	if w := do(t, s, "POST", "/sandboxes/"+id+"/timeout", `{"timeout":5}`, api(keyA)); w.Code != http.StatusNoContent {
		t.Fatalf("timeout: %d %s", w.Code, w.Body)
	}
	if got := core.lifetime[id]; got != 5*time.Second {
		t.Fatalf("lifetime after /timeout %v, want 5s", got)
	}

	// A resume without a timeout gets E2B's default one.
	do(t, s, "POST", "/sandboxes/"+id+"/pause", "", api(keyA))
	if w := do(t, s, "POST", "/v2/sandboxes/"+id+"/connect", `{}`, api(keyA)); w.Code != http.StatusCreated {
		t.Fatalf("connect: %d %s", w.Code, w.Body)
	}
	if got := core.lifetime[id]; got != DefaultTimeout {
		t.Fatalf("lifetime after a resume with no timeout %v, want %v", got, DefaultTimeout)
	}

	// A paused sandbox kept past its retention (the parked session's
	// expires_at) is gone.
	do(t, s, "POST", "/sandboxes/"+id+"/pause", "", api(keyA))
	core.mu.Lock()
	core.sessions[id].ExpiresAt = time.Now().Add(-time.Second)
	core.mu.Unlock()
	if w := do(t, s, "POST", "/v2/sandboxes/"+id+"/connect", `{}`, api(keyA)); w.Code != http.StatusNotFound {
		t.Fatalf("connect to a paused sandbox past its timeout: %d %s, want 404", w.Code, w.Body)
	}
	if _, err := core.Session(context.Background(), id); err == nil {
		t.Fatal("the expired paused sandbox's session was not deleted")
	}
	b := create(t, s, keyA, `{}`)
	id = b.SandboxID

	// A busy sandbox is not "already paused" (409 would tell the SDK so).
	core.mu.Lock()
	core.sessions[id].State = agentapi.SessionBusy
	core.mu.Unlock()
	if w := do(t, s, "POST", "/sandboxes/"+id+"/pause", "", api(keyA)); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("pause of a busy sandbox: %d %s, want 503", w.Code, w.Body)
	}
}

// The fake core keeps a session's Meta beside it, as the core does: it
// goes with its session (a restart drops the live ones from sessions).
func (f *fakeCore) Sessions(context.Context) []agentapi.Session {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []agentapi.Session{}
	for _, s := range f.sessions {
		out = append(out, *s)
	}
	return out
}

func (f *fakeCore) SessionMeta(_ context.Context, id string) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sessions[id]; !ok {
		return nil, errdefs.New(errdefs.ErrNotFound, "session "+id+" not found")
	}
	return f.meta[id], nil
}

func (f *fakeCore) SetSessionMeta(_ context.Context, id string, m json.RawMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sessions[id]; !ok {
		return errdefs.New(errdefs.ErrNotFound, "session "+id+" not found")
	}
	if !json.Valid(m) {
		return errdefs.Field("meta", "not JSON")
	}
	f.meta[id] = m
	return nil
}

// restart is a daemon restart as the endpoint sees it: the live sessions
// end, the parked ones stay, and a new Server starts over the core with
// the keys given (in a new order, or fewer).
func restart(t *testing.T, core *fakeCore, legacy string, keys ...string) *Server {
	t.Helper()
	core.mu.Lock()
	for id, s := range core.sessions {
		if s.State != agentapi.SessionParked {
			delete(core.sessions, id)
			delete(core.meta, id)
		}
	}
	core.mu.Unlock()
	k, err := NewKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Core: core, Keys: k, LegacyDir: legacy})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPausedSurvivesRestart: a paused sandbox is its key's, with its
// tokens and metadata, after a restart: its record is its session's
// Meta, which holds the key's fingerprint, never the key. A running one
// ends with the daemon; a killed one takes its record with it.
func TestPausedSurvivesRestart(t *testing.T) {
	core := newFakeCore()
	s := restart(t, core, "", keyA, keyB)
	paused := create(t, s, keyA, `{"metadata":{"k":"v"}}`)
	running := create(t, s, keyA, `{}`)
	gone := create(t, s, keyB, `{}`)
	api := func(key string) map[string]string { return map[string]string{"X-API-KEY": key} }
	for _, sb := range []sandboxJSON{paused, gone} {
		key := keyA
		if sb.SandboxID == gone.SandboxID {
			key = keyB
		}
		if w := do(t, s, "POST", "/sandboxes/"+sb.SandboxID+"/pause", "", api(key)); w.Code != http.StatusNoContent {
			t.Fatalf("pause: %d %s", w.Code, w.Body)
		}
	}
	if w := do(t, s, "DELETE", "/sandboxes/"+gone.SandboxID, "", api(keyB)); w.Code != http.StatusNoContent {
		t.Fatalf("kill: %d %s", w.Code, w.Body)
	}
	m, err := core.SessionMeta(context.Background(), paused.SandboxID)
	if err != nil || !strings.HasPrefix(string(m), `{"e2b":{"id":"`+paused.SandboxID+`"`) || containsKey(m) {
		t.Fatalf("the paused sandbox's Meta %s (%v): want its record, without the API key", m, err)
	}

	// The keys file's order changed: ownership follows the key, not its line.
	s2 := restart(t, core, "", keyB, keyA)
	if s2.lookup(running.SandboxID) != nil || s2.lookup(gone.SandboxID) != nil {
		t.Fatal("a running or killed sandbox was loaded after the restart")
	}
	if got := state(t, s2, keyA, paused.SandboxID); got != "paused" {
		t.Fatalf("after the restart: %q", got)
	}
	if w := do(t, s2, "GET", "/sandboxes/"+paused.SandboxID, "", api(keyB)); w.Code != http.StatusNotFound {
		t.Fatalf("another key after the restart: %d", w.Code)
	}
	w := do(t, s2, "POST", "/v2/sandboxes/"+paused.SandboxID+"/connect", `{"timeout":60}`, api(keyA))
	if w.Code != http.StatusCreated {
		t.Fatalf("connect after the restart: %d %s", w.Code, w.Body)
	}
	var sb sandboxJSON
	_ = json.Unmarshal(w.Body.Bytes(), &sb)
	if sb.EnvdAccessToken != paused.EnvdAccessToken || sb.TrafficAccessToken != paused.TrafficAccessToken || sb.Metadata["k"] != "v" {
		t.Fatalf("after the restart: %+v, want the tokens and metadata of %+v", sb, paused)
	}

	// A sandbox of a key no longer in the keys file is not loaded (no
	// key may reach it); its record stays, for when the key is back.
	do(t, s2, "POST", "/sandboxes/"+paused.SandboxID+"/pause", "", api(keyA))
	if s3 := restart(t, core, "", keyB); s3.lookup(paused.SandboxID) != nil {
		t.Fatal("a sandbox of a removed key was loaded")
	}
	if s4 := restart(t, core, "", keyA); s4.lookup(paused.SandboxID) == nil {
		t.Fatal("the key is back, its paused sandbox is not")
	}
}

func containsKey(b []byte) bool {
	return strings.Contains(string(b), keyA) || strings.Contains(string(b), keyB)
}

// TestAutoPausedSurvivesRestart: a sandbox created with onTimeout "pause"
// is parked by the daemon at its timeout, without the endpoint; its
// record, code contexts included, went with it, so that a restart finds
// it its key's, with its contexts, and its connect resumes it.
func TestAutoPausedSurvivesRestart(t *testing.T) {
	core := newFakeCore()
	s := restart(t, core, "", keyA, keyB)
	sb := create(t, s, keyA, `{"autoPause":true,"timeout":60}`)
	ctxs := do(t, s, "POST", "http://49999-"+sb.SandboxID+".localhost/contexts", `{"language":"python"}`, map[string]string{"E2B-Traffic-Access-Token": sb.TrafficAccessToken})
	if ctxs.Code != http.StatusOK {
		t.Fatalf("create a context: %d %s", ctxs.Code, ctxs.Body)
	}
	var c codeContext
	_ = json.Unmarshal(ctxs.Body.Bytes(), &c)
	// The daemon parks it at its timeout, without the endpoint.
	if _, err := core.ParkSession(context.Background(), sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	s2 := restart(t, core, "", keyB, keyA)
	got := s2.lookup(sb.SandboxID)
	if got == nil || !got.autoPause || !hasContext(got, c.ID) {
		t.Fatalf("after the restart: %+v, want the sandbox with its context %s and autoPause", got, c.ID)
	}
	if st := state(t, s2, keyA, sb.SandboxID); st != "paused" {
		t.Fatalf("after the restart: %q", st)
	}
	w := do(t, s2, "POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":60}`, map[string]string{"X-API-KEY": keyA})
	if w.Code != http.StatusCreated {
		t.Fatalf("connect after the restart: %d %s", w.Code, w.Body)
	}
	var back sandboxJSON
	_ = json.Unmarshal(w.Body.Bytes(), &back)
	if back.Lifecycle == nil || back.Lifecycle.OnTimeout != "pause" {
		t.Fatalf("lifecycle after the resume %+v, want onTimeout pause", back.Lifecycle)
	}
}
