package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// fakeDaemon answers the session and run routes the MCP server uses. An
// exec's or run's value is "LANGUAGE:CODE", so a test sees where the code
// ran; the code "throw" raises.
type fakeDaemon struct {
	mu       sync.Mutex
	sessions map[string]string // id -> language
	created  []string          // languages of the sessions created, in order
	deleted  []string
	runs     []string // languages of the one-shot runs
	requests []agentapi.SessionRequest
	next     int
}

func newFakeDaemon(t *testing.T, sessions map[string]string) (*fakeDaemon, *client.Client) {
	t.Helper()
	fd := &fakeDaemon{sessions: sessions}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.SessionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("session request: %v", err)
		}
		fd.mu.Lock()
		fd.next++
		id := fmt.Sprintf("s%d", fd.next)
		lang := req.Language
		if lang == "" {
			lang = agentapi.LanguagePython
		}
		fd.sessions[id] = lang
		fd.created = append(fd.created, lang)
		fd.requests = append(fd.requests, req)
		fd.mu.Unlock()
		writeJSON(w, http.StatusCreated, agentapi.Session{ID: id, Rootfs: "default", Language: lang, State: agentapi.SessionIdle})
	})
	mux.HandleFunc("GET /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		lang, ok := fd.session(r.PathValue("id"))
		if !ok {
			notFound(w)
			return
		}
		writeJSON(w, http.StatusOK, agentapi.Session{ID: r.PathValue("id"), Language: lang, State: agentapi.SessionIdle})
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		fd.mu.Lock()
		delete(fd.sessions, r.PathValue("id"))
		fd.deleted = append(fd.deleted, r.PathValue("id"))
		fd.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		lang, ok := fd.session(r.PathValue("id"))
		if !ok {
			notFound(w)
			return
		}
		var req agentapi.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("exec request: %v", err)
		}
		writeJSON(w, http.StatusOK, fakeResult(lang, req.Code))
	})
	mux.HandleFunc("POST /v1/sessions/{id}/fork", func(w http.ResponseWriter, r *http.Request) {
		lang, ok := fd.session(r.PathValue("id"))
		if !ok {
			notFound(w)
			return
		}
		var req agentapi.ForkRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Count == nil {
			t.Errorf("fork request: %v %+v", err, req)
			return
		}
		var out agentapi.ForkResult
		fd.mu.Lock()
		for range *req.Count {
			fd.next++
			id := fmt.Sprintf("b%d", fd.next)
			fd.sessions[id] = lang
			out.Sessions = append(out.Sessions, agentapi.CarriedSession{Session: agentapi.Session{ID: id, Language: lang, State: agentapi.SessionIdle},
				NotCarried: []agentapi.NotCarried{{Name: "f", Reason: "an open file"}}})
		}
		fd.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.RunRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("run request: %v", err)
		}
		fd.mu.Lock()
		fd.runs = append(fd.runs, req.Language)
		fd.mu.Unlock()
		writeJSON(w, http.StatusOK, fakeResult(req.Language, req.Code))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	var d net.Dialer
	cl := &client.Client{HTTPClient: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
	}}}
	return fd, cl
}

func (fd *fakeDaemon) session(id string) (string, bool) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	lang, ok := fd.sessions[id]
	return lang, ok
}

// live returns the ids of the sessions not deleted, sorted.
func (fd *fakeDaemon) live() []string {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	var ids []string
	for id := range fd.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func fakeResult(lang, code string) *agentapi.RunResult {
	if code == "throw" {
		return &agentapi.RunResult{Status: agentapi.StatusException, ExecutionCount: 1, Exception: &agentapi.Exception{
			Name: "Error", Value: "boom", Traceback: "Error: boom\n    at <cell 1>:1:7\n"}}
	}
	return &agentapi.RunResult{Status: agentapi.StatusOK, ExecutionCount: 1, Value: lang + ":" + code}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", agentapi.ContentTypeJSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, agentapi.ErrorBody{Error: &agentapi.Error{Code: agentapi.CodeNotFound, Message: "no such session"}})
}

// call calls a tool and returns its result and text; a protocol error
// fails the test.
func call(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any) (*mcpsdk.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return res, res.Content[0].(*mcpsdk.TextContent).Text
}

// TestRunJavaScriptSessions checks run_javascript's Node.js session: made
// on first use, apart from run_python's, its language fixed by the first
// call, reset with run_python's by reset_session, deleted with the
// connection; and a session named by session_id is checked for language.
func TestRunJavaScriptSessions(t *testing.T) {
	fd, cl := newFakeDaemon(t, map[string]string{"py": agentapi.LanguagePython, "js": agentapi.LanguageJavaScript})
	cs := connectConfig(t, Config{Client: cl, Info: dataSciInfo()})
	steps := []struct {
		tool    string
		args    map[string]any
		isError bool
		want    string // in the text
	}{
		{ToolRunPython, map[string]any{"code": "x = 1"}, false, "python:x = 1"},
		{ToolRunJavaScript, map[string]any{"code": "let y = 2"}, false, "--- value ---\njavascript:let y = 2\n"},
		{ToolRunJavaScript, map[string]any{"code": "y"}, false, "javascript:y"},
		{ToolRunJavaScript, map[string]any{"code": "let z: number = 3", "typescript": true}, true, "call reset_session"},
		{ToolRunJavaScript, map[string]any{"code": "throw"}, true, "--- exception ---\nError: boom\n    at <cell 1>:1:7\n"},
		{ToolRunJavaScript, map[string]any{"code": ""}, true, "minLength"},
		{ToolRunJavaScript, map[string]any{"code": "1", "timeout_s": 121}, true, "timeout_s is 121, above its maximum of 120 s"},
		{ToolResetSession, map[string]any{}, false, "run_python's and run_javascript's"},
		{ToolRunJavaScript, map[string]any{"code": "let z: number = 3", "typescript": true}, false, "typescript:let z: number = 3"},
		{ToolRunJavaScript, map[string]any{"code": "z + 1"}, false, "typescript:z + 1"}, // a TypeScript session runs JavaScript
		{ToolRunJavaScript, map[string]any{"code": "1", "session_id": "py"}, true, "it is a python session; run_javascript needs a javascript or typescript one"},
		{ToolRunJavaScript, map[string]any{"code": "1", "session_id": "js", "typescript": true}, true, "it is a JavaScript session"},
		{ToolRunJavaScript, map[string]any{"code": "1", "session_id": "js"}, false, "javascript:1"},
		{ToolRunJavaScript, map[string]any{"code": "1", "session_id": "gone"}, true, "no such session"},
	}
	for i, st := range steps {
		res, text := call(t, cs, st.tool, st.args)
		if res.IsError != st.isError || !strings.Contains(text, st.want) {
			t.Fatalf("step %d %s(%v): isError %v, want %v; text %q lacks %q", i, st.tool, st.args, res.IsError, st.isError, text, st.want)
		}
	}
	fd.mu.Lock()
	created, deleted := slices.Clone(fd.created), slices.Clone(fd.deleted)
	fd.mu.Unlock()
	if want := []string{"python", "javascript", "typescript"}; !slices.Equal(created, want) {
		t.Errorf("sessions created %v, want %v", created, want)
	}
	if want := []string{"s1", "s2"}; !slices.Equal(deleted, want) {
		t.Errorf("sessions deleted by reset_session %v, want %v", deleted, want)
	}
	cs.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		live := fd.live()
		if slices.Equal(live, []string{"js", "py"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions live after the connection ended: %v", live)
		}
	}
}

// TestRunJavaScriptPerCall checks that per-call mode runs JavaScript and
// TypeScript one-shot, without sessions.
func TestRunJavaScriptPerCall(t *testing.T) {
	fd, cl := newFakeDaemon(t, map[string]string{})
	cs := connectConfig(t, Config{Client: cl, Info: dataSciInfo(), SessionMode: SessionPerCall})
	if res, text := call(t, cs, ToolRunJavaScript, map[string]any{"code": "1 + 1"}); res.IsError || !strings.Contains(text, "javascript:1 + 1") {
		t.Fatalf("javascript: %s", text)
	}
	if res, text := call(t, cs, ToolRunJavaScript, map[string]any{"code": "const a: number = 1; a", "typescript": true}); res.IsError || !strings.Contains(text, "typescript:const a") {
		t.Fatalf("typescript: %s", text)
	}
	if res, text := call(t, cs, ToolRunJavaScript, map[string]any{"code": "throw"}); !res.IsError || !strings.Contains(text, "<cell 1>:1:7") {
		t.Fatalf("exception: %s", text)
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if len(fd.created) != 0 || !slices.Equal(fd.runs, []string{"javascript", "typescript", "javascript"}) {
		t.Fatalf("sessions %v, runs %v", fd.created, fd.runs)
	}
}
