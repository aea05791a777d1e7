package daemon

import (
	"encoding/base64"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// wireResult converts the engine's result to its wire form.
func wireResult(r *container.Result, id string) *agentapi.RunResult {
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
	out.Stdout, out.StdoutBase64 = textAndBase64(r.Stdout)
	out.Stderr, out.StderrBase64 = textAndBase64(r.Stderr)
	for _, f := range r.Files {
		fr := agentapi.FileResult{Path: f.Path, Size: f.Size, SHA256: f.SHA256, Mode: f.Mode, Mime: MimeOf(f.Path, f.Content)}
		if f.Content != nil {
			fr.ContentBase64 = base64.StdEncoding.EncodeToString(f.Content)
		}
		out.Files = append(out.Files, fr)
	}
	return out
}

// textAndBase64 returns b as text, and also as base64 when b is not valid
// UTF-8 (the text then has U+FFFD in place of invalid sequences).
func textAndBase64(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), base64.StdEncoding.EncodeToString(b)
}

// MimeOf guesses a file's type from its extension, then its content.
func MimeOf(p string, content []byte) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	if content != nil {
		return http.DetectContentType(content)
	}
	return ""
}
