package e2b

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/envd"
	"github.com/nsbox/nsbox/agentapi/e2b/interp"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

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
	// The value's rich forms (RunResult.ValueMime), as E2B's Result has them.
	HTML     string          `json:"html,omitempty"`
	Markdown string          `json:"markdown,omitempty"`
	SVG      string          `json:"svg,omitempty"`
	LaTeX    string          `json:"latex,omitempty"`
	JSON     json.RawMessage `json:"json,omitempty"`
	// error
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	Traceback string `json:"traceback,omitempty"`
	// number_of_executions
	ExecutionCount *int `json:"execution_count,omitempty"`
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
	c, err := interp.Resolve(req.ContextID, req.Language, envd.Home, sb.context)
	if err != nil {
		writeErr(w, err)
		return
	}
	// The head goes out before the cell runs: the SDK's timeoutMs counts
	// from it, and a cell may print nothing for a long time. Python's now;
	// a guest's once the core has it (OnStart), so that a language the
	// rootfs lacks, or a guest that cannot start, is the request's error.
	flusher, _ := w.(http.Flusher)
	started := false
	head := func(string) {
		if started {
			return
		}
		started = true
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !interp.Guest(c.Language) {
		head("")
	}
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
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	opts := daemon.RunOptions{
		OnStart:  head,
		OnStdout: func(b []byte) { emit(line{Type: "stdout", Text: string(b), Timestamp: now()}) },
		OnStderr: func(b []byte) { emit(line{Type: "stderr", Text: string(b), Timestamp: now()}) },
	}
	var res *agentapi.RunResult
	if interp.Guest(c.Language) {
		res, err = s.core.GuestExec(r.Context(), sb.id, daemon.GuestRef{Language: c.Language, Context: c.ID, Cwd: c.Cwd}, &agentapi.ExecRequest{Code: req.Code, Env: req.EnvVars}, opts)
	} else if release, cerr := s.cwds.Enter(sb.id, c, envd.Home, s.pyRun(r, sb)); cerr != nil {
		err = cerr
	} else {
		res, err = s.core.Exec(r.Context(), sb.id, &agentapi.ExecRequest{Code: req.Code, Context: pyContext(c.ID), Env: req.EnvVars}, opts)
		release()
	}
	if err != nil || res.Status != agentapi.StatusOK {
		// Ended under the cell (killed, its timeout): cut, as when E2B's VM goes (envd's abortStream); an error item would resolve runCode.
		if sess, serr := s.core.Session(r.Context(), sb.id); errors.Is(serr, errdefs.ErrNotFound) || serr == nil && (sess.State == agentapi.SessionDead || sess.State == agentapi.SessionParked) {
			panic(http.ErrAbortHandler)
		}
	}
	if err != nil && !started {
		writeErr(w, err)
		return
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
		m := res.ValueMime
		emit(line{Type: "result", Text: interp.PlainText(res.Value), Data: res.ValueData, IsMainResult: &main, HTML: m["text/html"],
			Markdown: m["text/markdown"], SVG: m["image/svg+xml"], LaTeX: m["text/latex"], JSON: json.RawMessage(m["application/json"])})
	}
	if name, value, tb, ok := interp.Error(res); ok {
		emit(line{Type: "error", Name: name, Value: value, Traceback: tb})
	}
	n := res.ExecutionCount
	emit(line{Type: "number_of_executions", ExecutionCount: &n})
	emit(line{Type: "end_of_execution"})
}

// context returns a context created in the sandbox.
func (sb *sandbox) context(id string) (interp.Context, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	c, ok := sb.contexts[id]
	return c, ok
}

// pyContext is a Python context's name in the session's interpreter: ""
// for the default one.
func pyContext(id string) string {
	if id == interp.DefaultID {
		return ""
	}
	return id
}

// pyRun runs Python of nsbox's own in the sandbox's interpreter
// (interp.CwdContext): its stdout, or its exception as an error.
func (s *Server) pyRun(r *http.Request, sb *sandbox) interp.Run {
	return func(code string) (string, error) {
		res, err := s.core.Exec(r.Context(), sb.id, &agentapi.ExecRequest{Code: code, Context: interp.CwdContext}, daemon.RunOptions{})
		if err == nil && res.Status != agentapi.StatusOK {
			err = fmt.Errorf("context working directory: %s %s", res.Status, cmp.Or(res.Error, res.Stderr))
		}
		if err != nil {
			return "", err
		}
		return res.Stdout, nil
	}
}

// createContextRequest is the body of POST /contexts.
type createContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// handleCreateContext makes a context: a namespace of its own in the
// session's Python interpreter (variables are not shared; files are; its
// cwd is interp.Cwds'), or
// a guest interpreter of its own for another language, started now in
// its cwd, as E2B's server starts a kernel.
func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	var req createContextRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	c := codeContext{ID: randomHex(8), Language: interp.Normalize(req.Language), Cwd: cmp.Or(req.Cwd, envd.Home)}
	if err := interp.Check(c.Language); err != nil {
		writeErr(w, err)
		return
	}
	if interp.Guest(c.Language) {
		if err := s.core.StartGuest(r.Context(), sb.id, daemon.GuestRef{Language: c.Language, Context: c.ID, Cwd: c.Cwd}); err != nil {
			writeErr(w, err)
			return
		}
	}
	sb.mu.Lock()
	sb.contexts[c.ID] = c
	sb.mu.Unlock()
	if err := s.keepRecord(r.Context(), sb); err != nil {
		// Not kept, it would be lost at a pause: refused instead.
		sb.mu.Lock()
		delete(sb.contexts, c.ID)
		sb.mu.Unlock()
		s.core.DropGuest(sb.id, c.ID)
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// handleListContexts lists the default contexts (interp.Defaults), then
// those created, by id.
func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	out := interp.Defaults(envd.Home, func(id string) bool { return s.core.HasGuest(sb.id, id) })
	n := len(out)
	sb.mu.Lock()
	for _, c := range sb.contexts {
		out = append(out, c)
	}
	sb.mu.Unlock()
	slices.SortFunc(out[n:], func(a, b codeContext) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, out)
}

// handleRemoveContext forgets a context and its variables (a guest's
// interpreter ends).
func (s *Server) handleRemoveContext(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	id := r.PathValue("ctx")
	c, ok := sb.context(id)
	if !ok {
		if _, err := interp.Resolve(id, "", envd.Home, sb.context); err == nil {
			writeErr(w, errdefs.Field("context", "a default context cannot be removed; restart it to clear it"))
			return
		}
		writeErr(w, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("context %q not found", id)))
		return
	}
	if interp.Guest(c.Language) {
		s.core.DropGuest(sb.id, id)
	} else if err := s.core.DropContext(r.Context(), sb.id, id); err != nil {
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
// kernel: a guest's interpreter ends, and its next cell starts a fresh
// one); the context stays.
func (s *Server) handleRestartContext(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	c, err := interp.Resolve(r.PathValue("ctx"), "", envd.Home, sb.context)
	if err != nil {
		writeErr(w, err)
		return
	}
	if interp.Guest(c.Language) {
		s.core.DropGuest(sb.id, c.ID)
	} else if err := s.core.DropContext(r.Context(), sb.id, pyContext(c.ID)); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
