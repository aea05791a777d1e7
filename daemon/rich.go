package daemon

import (
	"encoding/base64"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// richFields copies a cell's rich outputs and its output into out.
func richFields(out *agentapi.RunResult, res *runner.Result) {
	out.Value = res.Value
	out.ExecutionCount = res.Count
	if e := res.Exception; e != nil {
		out.Exception = &agentapi.Exception{Name: e.Name, Value: e.Value, Traceback: e.Traceback}
	}
	for _, f := range res.Figures {
		out.Figures = append(out.Figures, agentapi.Figure{Mime: f.MIME, DataBase64: base64.StdEncoding.EncodeToString(f.Data)})
	}
	out.Stdout, out.StdoutBase64 = textAndBase64(res.Stdout)
	out.Stderr, out.StderrBase64 = textAndBase64(res.Stderr)
	out.StdoutBytes, out.StderrBytes = res.StdoutBytes, res.StderrBytes
	out.StdoutTruncated, out.StderrTruncated = res.StdoutTruncated, res.StderrTruncated
}

// wireFiles converts changed-file records.
func wireFiles(files []container.FileInfo) []agentapi.FileResult {
	var out []agentapi.FileResult
	for _, f := range files {
		fr := agentapi.FileResult{Path: f.Path, Size: f.Size, SHA256: f.SHA256, Mode: f.Mode, Mime: MimeOf(f.Path, f.Content)}
		if f.Content != nil {
			fr.ContentBase64 = base64.StdEncoding.EncodeToString(f.Content)
		}
		out = append(out, fr)
	}
	return out
}
