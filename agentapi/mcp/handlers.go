package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
)

func (s *Server) perCall() bool { return s.cfg.SessionMode == SessionPerCall }

// ShellResult is the structured result of run_shell.
type ShellResult struct {
	// Status is ok, exit_nonzero, timeout, oom, output_limit, crashed,
	// cancelled or error.
	Status          string `json:"status"`
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	Error           string `json:"error,omitempty"`
	WallMs          int64  `json:"wall_ms"`
}

func (s *Server) runShell(ctx context.Context, req *mcpsdk.CallToolRequest, in RunShellInput) (*mcpsdk.CallToolResult, any, error) {
	timeoutMs := int64(in.TimeoutS) * 1000
	if s.perCall() {
		// The same cell as in a session, run once in the daemon's default
		// language.
		res, err := s.client.Run(ctx, s.runRequest(s.facts.mainLang(), shellCode(in.Command), timeoutMs))
		if err != nil {
			return nil, nil, err
		}
		out := shellFromExec(res)
		s.facts.explainShell(out)
		return shellResult(out, nil), out, nil
	}
	res, notes, err := s.exec(ctx, req.Session, "", "", nil, in.SessionID, shellCode(in.Command), timeoutMs)
	if err != nil {
		return nil, nil, err
	}
	out := shellFromExec(res)
	s.facts.explainShell(out)
	return shellResult(out, notes), out, nil
}

// shellCode is the cell of the daemon's default language (Python) that
// runs command with bash -c (sh without
// bash) on the session's stdout and stderr, its value the exit code. It is
// one expression, so it leaves no names behind in the user's namespace; the
// command travels base64-encoded, so no quoting can break out of it.
func shellCode(command string) string {
	b64 := base64.StdEncoding.EncodeToString([]byte(command))
	return `(lambda sp, sh, cmd: sp.run([sh, "-c", cmd], stdin=sp.DEVNULL).returncode)(__import__("subprocess"), ` +
		`__import__("shutil").which("bash") or "/bin/sh", __import__("base64").b64decode("` + b64 + `").decode("utf-8", "surrogateescape"))`
}

// shellFromExec reads a shellCode exec's result.
func shellFromExec(res *agentapi.RunResult) *ShellResult {
	out := &ShellResult{Status: res.Status, Stdout: res.Stdout, Stderr: res.Stderr,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, Error: res.Error, WallMs: res.WallMs}
	switch res.Status {
	case agentapi.StatusOK:
		code, err := strconv.Atoi(res.Value)
		if err != nil {
			out.Status, out.Error = agentapi.StatusError, fmt.Sprintf("unexpected shell result %q", res.Value)
			break
		}
		out.ExitCode = code
		if code != 0 {
			out.Status = agentapi.StatusExitNonzero
		}
		if code < 0 {
			out.Error = fmt.Sprintf("killed by signal %d", -code)
		}
	default:
		out.ExitCode = -1
		if res.Exception != nil && out.Error == "" {
			out.Error = res.Exception.Name + ": " + res.Exception.Value
		}
	}
	return out
}

// runRequest is a per-call run of code in lang, with the operator's
// rootfs, limits, network and mounts.
func (s *Server) runRequest(lang, code string, timeoutMs int64) *agentapi.RunRequest {
	return &agentapi.RunRequest{Language: lang, Code: code, Rootfs: s.cfg.Rootfs, Limits: s.callLimits(timeoutMs),
		Network: s.cfg.Network, Volumes: s.cfg.Volumes, Datasets: s.cfg.Datasets}
}

// callLimits are the limits of one per-call run.
func (s *Server) callLimits(timeoutMs int64) *agentapi.Limits {
	lim := s.cfg.Limits
	if timeoutMs > 0 {
		lim.TimeoutMs = timeoutMs
	}
	return &lim
}

// exec runs code in the explicit session, or in the connection's session
// for key (a run tool's, "" the main one), made with lang on first use and
// checked with fits (Server.session). A connection session that expired
// or died is replaced once, with a note; one that dies in this exec is
// forgotten, with a note.
func (s *Server) exec(ctx context.Context, ss *mcpsdk.ServerSession, key, lang string, fits func(string) error, explicit, code string, timeoutMs int64) (*agentapi.RunResult, []string, error) {
	req := &agentapi.ExecRequest{Code: code, TimeoutMs: timeoutMs}
	if explicit != "" {
		res, err := s.client.Exec(ctx, explicit, req)
		return res, nil, err
	}
	var notes []string
	for attempt := 0; ; attempt++ {
		id, created, err := s.session(ctx, ss, key, lang, fits)
		if err != nil {
			return nil, notes, err
		}
		res, err := s.client.Exec(ctx, id, req)
		if err != nil {
			if isGone(err) {
				s.forget(ss, key, id)
				if !created && attempt == 0 {
					notes = append(notes, "the previous sandbox session had ended (idle timeout or crash): this ran in a fresh session, earlier variables and files are gone")
					continue
				}
			}
			return nil, notes, err
		}
		if res.SessionDead {
			s.forget(ss, key, id)
			notes = append(notes, fmt.Sprintf("the sandbox session died (%s): its variables and files are lost; the next call starts a fresh session", res.Status))
		}
		return res, notes, nil
	}
}

// withSession runs op on the explicit session or the connection's.
func (s *Server) withSession(ctx context.Context, ss *mcpsdk.ServerSession, explicit string, op func(id string) error) error {
	if explicit != "" {
		return op(explicit)
	}
	id, _, err := s.session(ctx, ss, "", "", nil)
	if err != nil {
		return err
	}
	err = op(id)
	if isGone(err) && s.sessionGone(ctx, id) {
		s.forget(ss, "", id)
		return fmt.Errorf("%w (the sandbox session had ended; the next call starts a fresh one, earlier files are gone)", err)
	}
	return err
}

// sessionGone reports whether session id no longer exists or is dead (a
// 404 of a file operation may be about the file or the session).
func (s *Server) sessionGone(ctx context.Context, id string) bool {
	sess, err := s.client.Session(ctx, id)
	if err != nil {
		return isGone(err)
	}
	return sess.State == agentapi.SessionDead
}

// workspacePath turns "/workspace/a", "./a" and "a" into "a"; other
// absolute paths are refused: nothing outside /workspace is reachable.
func workspacePath(p string) (string, error) {
	if p == "" || p == "/workspace" || p == "/workspace/" || p == "." || p == "./" {
		return "", nil
	}
	p = strings.TrimPrefix(p, workspacePrefix)
	p = strings.TrimPrefix(p, "./")
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q: give a path relative to /workspace; files outside /workspace (and every file of the host) are not reachable from these tools", p)
	}
	p = strings.TrimSuffix(p, "/")
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return "", fmt.Errorf("path %q: give a clean path relative to /workspace, without '.', '..' or empty elements", p)
		}
	}
	return p, nil
}

// WriteFileResult is the structured result of write_file.
type WriteFileResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

func (s *Server) writeFile(ctx context.Context, req *mcpsdk.CallToolRequest, in WriteFileInput) (*mcpsdk.CallToolResult, any, error) {
	data := []byte(in.Content)
	switch in.Encoding {
	case "", encodingUTF8:
	case encodingBase64:
		d, err := base64.StdEncoding.DecodeString(in.Content)
		if err != nil {
			return nil, nil, fmt.Errorf("content is not valid standard base64: %w", err)
		}
		data = d
	default:
		return nil, nil, fmt.Errorf("encoding %q: use utf-8 or base64", in.Encoding)
	}
	p, err := workspacePath(in.Path)
	if err != nil {
		return nil, nil, err
	}
	err = s.withSession(ctx, req.Session, in.SessionID, func(id string) error {
		return s.client.PutFile(ctx, id, p, bytes.NewReader(data))
	})
	if err != nil {
		return nil, nil, err
	}
	out := &WriteFileResult{Path: p, Bytes: len(data)}
	return textResult(fmt.Sprintf("wrote %d bytes to %s%s", len(data), workspacePrefix, p)), out, nil
}

// ReadFileResult is the structured result of read_file (the content is in
// the result's content blocks).
type ReadFileResult struct {
	Path     string `json:"path"`
	Bytes    int    `json:"bytes"`
	Mime     string `json:"mime"`
	Encoding string `json:"encoding"` // image, utf-8 or base64
	// Truncated says the text content holds only the first part.
	Truncated bool `json:"truncated,omitempty"`
}

func (s *Server) readFile(ctx context.Context, req *mcpsdk.CallToolRequest, in ReadFileInput) (*mcpsdk.CallToolResult, any, error) {
	p, err := workspacePath(in.Path)
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	err = s.withSession(ctx, req.Session, in.SessionID, func(id string) error {
		var err error
		data, err = s.client.GetFile(ctx, id, p)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxReadBytes {
		return nil, nil, fmt.Errorf("%s is %d bytes; read_file returns at most %d: summarise or convert it with %s first", p, len(data), maxReadBytes, s.facts.mainTool())
	}
	res, out := fileContent(p, data)
	return res, out, nil
}

// ListFilesResult is the structured result of list_files.
type ListFilesResult struct {
	Files     []agentapi.WorkspaceFile `json:"files"`
	Truncated bool                     `json:"truncated,omitempty"`
}

func (s *Server) listFiles(ctx context.Context, req *mcpsdk.CallToolRequest, in ListFilesInput) (*mcpsdk.CallToolResult, any, error) {
	p, err := workspacePath(in.Path)
	if err != nil {
		return nil, nil, err
	}
	var all *agentapi.FileList
	err = s.withSession(ctx, req.Session, in.SessionID, func(id string) error {
		var err error
		all, err = s.client.FileList(ctx, id)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	// The daemon's list stops at 10,000 entries; this one at fewer.
	out := &ListFilesResult{Files: []agentapi.WorkspaceFile{}, Truncated: all.FilesTruncated}
	for _, f := range all.Files {
		if p != "" && f.Path != p && !strings.HasPrefix(f.Path, p+"/") {
			continue
		}
		if len(out.Files) == maxListedFiles {
			out.Truncated = true
			break
		}
		out.Files = append(out.Files, f)
	}
	if p != "" && len(out.Files) == 0 {
		return nil, nil, fmt.Errorf("%s%s: no such file or directory", workspacePrefix, p)
	}
	return textResult(fileListing(out)), out, nil
}

func (s *Server) forkSession(ctx context.Context, req *mcpsdk.CallToolRequest, in ForkSessionInput) (*mcpsdk.CallToolResult, any, error) {
	count := max(in.Count, 1)
	parent := in.SessionID
	if parent == "" {
		id, _, err := s.session(ctx, req.Session, "", "", nil)
		if err != nil {
			return nil, nil, err
		}
		parent = id
	}
	res, err := s.client.ForkSession(ctx, parent, count)
	if err != nil {
		return nil, nil, fmt.Errorf("forking session %s: %w", parent, err)
	}
	out := ForkSessionOutput{Parent: parent}
	c := s.conn(req.Session)
	c.mu.Lock()
	for _, b := range res.Sessions {
		c.branches = append(c.branches, b.ID)
		out.Branches = append(out.Branches, b.ID)
		if len(b.NotCarried) > 0 {
			if out.NotCarried == nil {
				out.NotCarried = map[string][]agentapi.NotCarried{}
			}
			out.NotCarried[b.ID] = b.NotCarried
		}
	}
	c.mu.Unlock()
	return textResult(forkText(out, s.facts.mainTool())), out, nil
}

// forkText tells the model its branches and what did not come along;
// main is the main run tool.
func forkText(out ForkSessionOutput, main string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Made %d branch(es) of session %s: %s. Pass one as session_id to %s, run_shell or the file tools; "+
		"calls without session_id still run in the original.", len(out.Branches), out.Parent, strings.Join(out.Branches, ", "), main)
	if len(out.Branches) > 0 {
		if nc := out.NotCarried[out.Branches[0]]; len(nc) > 0 {
			b.WriteString("\nNot carried into the branches (define them again there if needed):")
			for _, n := range nc {
				fmt.Fprintf(&b, "\n- %s: %s", n.Name, n.Reason)
			}
		}
	}
	return b.String()
}

func (s *Server) resetSession(ctx context.Context, req *mcpsdk.CallToolRequest, _ ResetSessionInput) (*mcpsdk.CallToolResult, any, error) {
	c := s.conn(req.Session)
	c.mu.Lock()
	had := s.dropSessions(c)
	c.mu.Unlock()
	var tools []string
	for _, key := range had {
		tools = append(tools, s.toolOf(key)+"'s")
	}
	var msg string
	switch {
	case len(had) == 0:
		msg = "There was no sandbox session yet; the next call starts a fresh one."
	case len(had) == 1 && had[0] == "":
		msg = "The sandbox session was discarded (variables, imports and /workspace files are gone); the next call starts a fresh one."
	case len(had) == 1:
		msg = tools[0] + " sandbox session was discarded (variables, modules and its /workspace files are gone); the next call starts a fresh one."
	default:
		msg = "The sandbox sessions were discarded, " + strings.Join(tools[:len(tools)-1], ", ") + " and " + tools[len(tools)-1] +
			" (variables, imports and /workspace files are gone); the next call starts a fresh one."
	}
	return textResult(msg), map[string]bool{"reset": len(had) > 0}, nil
}

// toolOf names the run tool of a connection's session key.
func (s *Server) toolOf(key string) string {
	if key == "" {
		return s.facts.mainTool()
	}
	return RunTool(key)
}
