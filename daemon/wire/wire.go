// Package wire converts the engine's and the runners' results to their
// wire form (agentapi.RunResult and its parts), for runs and session
// execs alike.
package wire

import (
	"encoding/base64"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// Result converts the engine's result to its wire form.
func Result(r *container.Result, id string) *agentapi.RunResult {
	if r.ID != "" {
		id = r.ID
	}
	out := &agentapi.RunResult{
		ID:              id,
		Status:          string(r.Status),
		ExitCode:        r.ExitCode,
		Signal:          r.Signal,
		Error:           r.Error,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		StdoutBytes:     r.StdoutBytes,
		StderrBytes:     r.StderrBytes,
		WallMs:          r.WallTime.Milliseconds(),
		CPUMs:           r.CPUTime.Milliseconds(),
		MemoryPeakBytes: r.MemoryPeakBytes,
		FilesTruncated:  r.FilesTruncated,
	}
	out.Stdout, out.StdoutBase64 = TextAndBase64(r.Stdout)
	out.Stderr, out.StderrBase64 = TextAndBase64(r.Stderr)
	for _, f := range r.Files {
		fr := agentapi.FileResult{Path: f.Path, Size: f.Size, SHA256: f.SHA256, Mode: f.Mode, Mime: Mime(f.Path, f.Content)}
		if f.Content != nil {
			fr.ContentBase64 = base64.StdEncoding.EncodeToString(f.Content)
		}
		out.Files = append(out.Files, fr)
	}
	return out
}

// TextAndBase64 returns b as text, and also as base64 when b is not valid
// UTF-8 (the text then has U+FFFD in place of invalid sequences). b is
// the caller's to give: valid text shares its bytes, which must not be
// written again (the engine's and the runners' captures only ever append
// past them). A copy took another 2 × 64 MiB for the largest results.
func TextAndBase64(b []byte) (string, string) {
	if utf8.Valid(b) {
		if len(b) == 0 {
			return "", ""
		}
		return unsafe.String(&b[0], len(b)), ""
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), base64.StdEncoding.EncodeToString(b)
}

// Mime guesses a file's type from its extension, then its content.
func Mime(p string, content []byte) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	if content != nil {
		return http.DetectContentType(content)
	}
	return ""
}

// Cell copies a cell's rich outputs and its output into out.
func Cell(out *agentapi.RunResult, res *runner.Result) {
	out.Value = res.Value
	out.ValueData, out.ValueMime = res.ValueData, res.ValueMime
	out.ExecutionCount = res.Count
	if e := res.Exception; e != nil {
		out.Exception = &agentapi.Exception{Name: e.Name, Value: e.Value, Traceback: e.Traceback}
	}
	for _, f := range res.Figures {
		out.Figures = append(out.Figures, agentapi.Figure{Mime: f.MIME, DataBase64: base64.StdEncoding.EncodeToString(f.Data), Chart: f.Chart})
	}
	out.Stdout, out.StdoutBase64 = TextAndBase64(res.Stdout)
	out.Stderr, out.StderrBase64 = TextAndBase64(res.Stderr)
	out.StdoutBytes, out.StderrBytes = res.StdoutBytes, res.StderrBytes
	out.StdoutTruncated, out.StderrTruncated = res.StdoutTruncated, res.StderrTruncated
}

// Files converts changed-file records.
func Files(files []container.FileInfo) []agentapi.FileResult {
	var out []agentapi.FileResult
	for _, f := range files {
		fr := agentapi.FileResult{Path: f.Path, Size: f.Size, SHA256: f.SHA256, Mode: f.Mode, Mime: Mime(f.Path, f.Content)}
		if f.Content != nil {
			fr.ContentBase64 = base64.StdEncoding.EncodeToString(f.Content)
		}
		out = append(out, fr)
	}
	return out
}

// CellExit gives a cell's outcome the exit code and signal the same code
// would have had as `python3 -c CODE`: 0 when it ran to its end, 1 when it
// raised, 137 and SIGKILL when a limit (time, memory, output) ended it, as
// the engine kills an argv run's cgroup. Runs and session execs use it alike.
func CellExit(status string) (code int, signal string) {
	switch status {
	case agentapi.StatusOK:
		return 0, ""
	case agentapi.StatusException:
		return 1, ""
	case agentapi.StatusTimeout, agentapi.StatusOOM, agentapi.StatusOutputLimit:
		return 137, "SIGKILL"
	}
	return 0, ""
}

// Entry describes a workspace entry.
func Entry(e container.Entry) agentapi.WorkspaceFile {
	wf := agentapi.WorkspaceFile{Path: e.Path, Size: e.Size, Mode: e.Mode, ModTime: e.ModTime.UTC(), Dir: e.Dir, Symlink: e.Symlink, SymlinkTarget: e.Target}
	if !e.Dir && !e.Symlink {
		wf.Mime = Mime(e.Path, nil)
	}
	return wf
}
