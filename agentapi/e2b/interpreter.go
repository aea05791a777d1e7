package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/envd"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/lang"
)

// defaultContext is the id the interpreter's default Python context is
// listed under; code sent without a context runs there (the session's
// __main__, as /v1 execs do).
const defaultContext = "default"

// executeRequest is the body of POST /execute.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// line is one JSON line of /execute's answer, as the code interpreter
// streams them (stdout, stderr, result, error, number_of_executions,
// end_of_execution).
type line struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	// result
	PNG          string `json:"png,omitempty"`
	IsMainResult *bool  `json:"is_main_result,omitempty"`
	// chart and data: nsbox's figure chart and DataFrame data, whose
	// shapes are E2B's Chart and data (docs/API.md), passed through.
	Chart json.RawMessage `json:"chart,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
	// error
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	Traceback string `json:"traceback,omitempty"`
	// number_of_executions
	ExecutionCount *int `json:"execution_count,omitempty"`
}

// interpreted returns the language the code interpreter runs for name
// ("" is the default one), or a field error: a language whose contexts
// the interpreter serves (daemon/lang: python, alias python3).
func interpreted(name string) (*lang.Descriptor, error) {
	l := lang.Default()
	if name != "" {
		l, _ = lang.Builtin(name)
	}
	if l == nil || !l.Contexts() {
		return nil, errdefs.Field("language", "%q: nsbox's code interpreter runs %s", name, lang.Default().Name)
	}
	return l, nil
}

// handleExecute runs code in a context of the session's interpreter and
// streams its output as it comes, then its results. A client that goes
// away (the SDK's timeoutMs) interrupts the cell; the context lives on.
func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	var req executeRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	if _, err := interpreted(req.Language); err != nil {
		writeErr(w, err)
		return
	}
	ctxID := req.ContextID
	if ctxID == defaultContext {
		ctxID = ""
	}
	if ctxID != "" && !sb.hasContext(ctxID) {
		writeErr(w, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("context %q not found in sandbox %s", req.ContextID, sb.id)))
		return
	}
	// The head goes out now: the SDK's timeoutMs counts from it, and a
	// cell may print nothing for a long time.
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	emit := func(l line) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(l)
		_, _ = w.Write(append(b, '\n'))
		if flusher != nil {
			flusher.Flush()
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	res, err := s.core.Exec(r.Context(), sb.id, &agentapi.ExecRequest{Code: req.Code, Context: ctxID, Env: req.EnvVars}, daemon.RunOptions{
		OnStdout: func(b []byte) { emit(line{Type: "stdout", Text: string(b), Timestamp: now()}) },
		OnStderr: func(b []byte) { emit(line{Type: "stderr", Text: string(b), Timestamp: now()}) },
	})
	if err != nil || res.Status != agentapi.StatusOK {
		// Ended under the cell (killed, its timeout): cut, as when E2B's VM goes (envd's abortStream); an error item would resolve runCode.
		if sess, serr := s.core.Session(r.Context(), sb.id); errors.Is(serr, errdefs.ErrNotFound) || serr == nil && (sess.State == agentapi.SessionDead || sess.State == agentapi.SessionParked) {
			panic(http.ErrAbortHandler)
		}
	}
	if err != nil {
		emit(line{Type: "error", Name: "SandboxError", Value: err.Error()})
		emit(line{Type: "end_of_execution"})
		return
	}
	for _, f := range res.Figures {
		if f.Mime == "image/png" {
			emit(line{Type: "result", PNG: f.DataBase64, Chart: f.Chart, Text: "<Figure>", IsMainResult: new(bool)})
		}
	}
	if res.Value != "" {
		main := true
		emit(line{Type: "result", Text: plainText(res.Value), Data: res.ValueData, IsMainResult: &main})
	}
	switch {
	case res.Exception != nil:
		emit(line{Type: "error", Name: res.Exception.Name, Value: res.Exception.Value, Traceback: res.Exception.Traceback})
	case res.Status != agentapi.StatusOK:
		emit(line{Type: "error", Name: res.Status, Value: res.Error})
	}
	n := res.ExecutionCount
	emit(line{Type: "number_of_executions", ExecutionCount: &n})
	emit(line{Type: "end_of_execution"})
}

// plainText is a result's text as E2B's code interpreter sends it: the
// text/plain form (a Python value's repr) less one pair of quotes that
// begin and end it, as its server's Result model strips them from every
// result (template/server/api/models/result.py), so a str 'bar' is bar
// while ['bar'] and 1 keep their repr. A quote alone is "", as there.
// /v1's value stays the repr, which tells the str "1" from the int 1.
func plainText(repr string) string {
	if n := len(repr); n > 0 && (repr[0] == '\'' || repr[0] == '"') && repr[n-1] == repr[0] {
		return repr[1:max(n-1, 1)]
	}
	return repr
}

func (sb *sandbox) hasContext(id string) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	_, ok := sb.contexts[id]
	return ok
}

// createContextRequest is the body of POST /contexts.
type createContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// handleCreateContext makes a Python context: a namespace of its own in
// the session's interpreter (variables are not shared; files are).
func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	var req createContextRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	l, err := interpreted(req.Language)
	if err != nil {
		writeErr(w, err)
		return
	}
	if req.Cwd != "" && req.Cwd != envd.Home && req.Cwd != "/workspace" {
		writeErr(w, errdefs.Field("cwd", "%q: a context's working directory is the sandbox's home, %s (contexts share one interpreter)", req.Cwd, envd.Home))
		return
	}
	c := codeContext{ID: randomHex(8), Language: l.Name, Cwd: envd.Home}
	sb.mu.Lock()
	sb.contexts[c.ID] = c
	sb.mu.Unlock()
	if err := s.keepRecord(r.Context(), sb); err != nil {
		// Not kept, it would be lost at a pause: refused instead.
		sb.mu.Lock()
		delete(sb.contexts, c.ID)
		sb.mu.Unlock()
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	out := []codeContext{{ID: defaultContext, Language: lang.Default().Name, Cwd: envd.Home}}
	sb.mu.Lock()
	for _, c := range sb.contexts {
		out = append(out, c)
	}
	sb.mu.Unlock()
	slices.SortFunc(out[1:], func(a, b codeContext) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	writeJSON(w, http.StatusOK, out)
}

// handleRemoveContext forgets a context and its variables.
func (s *Server) handleRemoveContext(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	id := r.PathValue("ctx")
	if id == defaultContext {
		writeErr(w, errdefs.Field("context", "the default context cannot be removed; restart it to clear it"))
		return
	}
	if !sb.hasContext(id) {
		writeErr(w, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("context %q not found", id)))
		return
	}
	if err := s.core.DropContext(r.Context(), sb.id, id); err != nil {
		writeErr(w, err)
		return
	}
	sb.mu.Lock()
	delete(sb.contexts, id)
	sb.mu.Unlock()
	if err := s.keepRecord(r.Context(), sb); err != nil {
		// Its variables are gone; a record that still names it lists
		// an empty context after a pause.
		s.log.Warn("e2b: a removed context stays in the sandbox's record", "sandbox", sb.id, "context", id, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleRestartContext clears a context's variables (E2B restarts its
// kernel); the context stays.
func (s *Server) handleRestartContext(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	id := r.PathValue("ctx")
	drop := id
	if id == defaultContext {
		drop = ""
	} else if !sb.hasContext(id) {
		writeErr(w, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("context %q not found", id)))
		return
	}
	if err := s.core.DropContext(r.Context(), sb.id, drop); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
