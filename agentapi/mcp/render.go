package mcp

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
)

func textResult(s string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
}

// section appends "--- name ---\nbody" when body is not empty.
func section(b *strings.Builder, name, body string) {
	if body == "" {
		return
	}
	fmt.Fprintf(b, "--- %s ---\n%s", name, body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteByte('\n')
	}
}

func truncationNotes(b *strings.Builder, stdoutCut bool, stdoutBytes int64, stdout string, stderrCut bool, stderrBytes int64, stderr string) {
	if stdoutCut {
		fmt.Fprintf(b, "[stdout truncated: %d bytes produced, the first %d shown; write large output to a file instead]\n", stdoutBytes, len(stdout))
	}
	if stderrCut {
		fmt.Fprintf(b, "[stderr truncated: %d bytes produced, the first %d shown]\n", stderrBytes, len(stderr))
	}
}

// cellText renders the result of a Python or JavaScript cell as the text a
// model reads; f names the limits a result may have run into.
func cellText(res *agentapi.RunResult, notes []string, f facts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s", res.Status)
	if res.ExecutionCount > 0 {
		fmt.Fprintf(&b, " (cell %d)", res.ExecutionCount)
	}
	fmt.Fprintf(&b, ", %d ms\n", res.WallMs)
	for _, n := range notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if res.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", res.Error)
	}
	switch res.Status {
	case agentapi.StatusTimeout:
		b.WriteString("the code ran past its timeout and was interrupted; make it faster, work on less data, or pass a larger timeout_s\n")
	case agentapi.StatusOOM:
		fmt.Fprintf(&b, "the sandbox ran out of memory%s; use less data or process it in chunks\n", f.memoryText())
	case agentapi.StatusOutputLimit:
		fmt.Fprintf(&b, "the output passed the cap of %s per stream and the code was stopped; write large output to a file, or print a summary\n", sizeText(f.output))
	}
	section(&b, "stdout", res.Stdout)
	section(&b, "stderr", res.Stderr)
	truncationNotes(&b, res.StdoutTruncated, res.StdoutBytes, res.Stdout, res.StderrTruncated, res.StderrBytes, res.Stderr)
	section(&b, "value", res.Value)
	if e := res.Exception; e != nil {
		tb := e.Traceback
		if tb == "" {
			tb = e.Name + ": " + e.Value
		}
		section(&b, "exception", tb)
	}
	if n := len(res.Figures); n > 0 {
		fmt.Fprintf(&b, "[%d figure(s) returned as PNG images]\n", n)
	}
	// Caches the libraries write under $HOME (/workspace/.cache) are noise
	// to a model; structuredContent still lists them.
	header := false
	for _, f := range res.Files {
		if strings.HasPrefix(f.Path, ".cache/") {
			continue
		}
		if !header {
			b.WriteString("files created or changed in /workspace:\n")
			header = true
		}
		fmt.Fprintf(&b, "  %s (%d bytes)\n", f.Path, f.Size)
	}
	return b.String()
}

// cellResult is the tool result of a run tool (run_python, run_javascript): the
// text, one image per figure, isError unless the code ran to its end.
func cellResult(res *agentapi.RunResult, notes []string, f facts) *mcpsdk.CallToolResult {
	out := &mcpsdk.CallToolResult{
		Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: cellText(res, notes, f)}},
		IsError: res.Status != agentapi.StatusOK,
	}
	for _, f := range res.Figures {
		data, err := base64.StdEncoding.DecodeString(f.DataBase64)
		if err != nil {
			continue
		}
		out.Content = append(out.Content, &mcpsdk.ImageContent{Data: data, MIMEType: f.Mime})
	}
	return out
}

func shellResult(r *ShellResult, notes []string) *mcpsdk.CallToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s, exit code %d, %d ms\n", r.Status, r.ExitCode, r.WallMs)
	for _, n := range notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", r.Error)
	}
	section(&b, "stdout", r.Stdout)
	section(&b, "stderr", r.Stderr)
	truncationNotes(&b, r.StdoutTruncated, int64(len(r.Stdout)), r.Stdout, r.StderrTruncated, int64(len(r.Stderr)), r.Stderr)
	return &mcpsdk.CallToolResult{
		Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: b.String()}},
		IsError: r.Status != agentapi.StatusOK,
	}
}

// isImage says whether read_file returns a file of type m as image content.
func isImage(m string) bool {
	switch m {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// fileContent renders a file read from the workspace: images as image
// content, UTF-8 text as text (cut past maxReadTextBytes), other bytes as
// base64 text.
func fileContent(p string, data []byte) (*mcpsdk.CallToolResult, *ReadFileResult) {
	sniffed := http.DetectContentType(data)
	mt := mime.TypeByExtension(path.Ext(p))
	if mt == "" {
		mt = sniffed
	}
	out := &ReadFileResult{Path: p, Bytes: len(data), Mime: mt}
	if base, _, _ := strings.Cut(sniffed, ";"); isImage(base) {
		out.Encoding, out.Mime = "image", base
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: fmt.Sprintf("%s%s: %s, %d bytes", workspacePrefix, p, base, len(data))},
			&mcpsdk.ImageContent{Data: data, MIMEType: base},
		}}, out
	}
	if utf8.Valid(data) && !strings.ContainsRune(string(data), 0) {
		out.Encoding = encodingUTF8
		text := string(data)
		if len(text) > maxReadTextBytes {
			cut := maxReadTextBytes
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = text[:cut] + fmt.Sprintf("\n[truncated: the file is %d bytes, the first %d shown; use run_shell (head, tail, sed -n) to read the rest]\n", len(data), cut)
			out.Truncated = true
		}
		return textResult(text), out
	}
	out.Encoding = encodingBase64
	shown := data
	if base64.StdEncoding.EncodedLen(len(shown)) > maxReadTextBytes {
		shown = shown[:maxReadTextBytes/4*3]
		out.Truncated = true
	}
	text := fmt.Sprintf("%s%s: binary (%s), %d bytes, base64:\n%s", workspacePrefix, p, mt, len(data), base64.StdEncoding.EncodeToString(shown))
	if out.Truncated {
		text += fmt.Sprintf("\n[truncated: the first %d bytes shown]", len(shown))
	}
	return textResult(text), out
}

// fileListing renders a list_files result, one entry a line.
func fileListing(l *ListFilesResult) string {
	if len(l.Files) == 0 {
		return "/workspace is empty\n"
	}
	var b strings.Builder
	for _, f := range l.Files {
		switch {
		case f.Dir:
			fmt.Fprintf(&b, "%s/\n", f.Path)
		case f.Symlink:
			fmt.Fprintf(&b, "%s (symlink)\n", f.Path)
		default:
			fmt.Fprintf(&b, "%s\t%d bytes\t%s\n", f.Path, f.Size, f.Mime)
		}
	}
	switch {
	case l.Truncated && len(l.Files) == maxListedFiles:
		fmt.Fprintf(&b, "[listing cut at %d entries; pass a path to list less]\n", maxListedFiles)
	case l.Truncated:
		b.WriteString("[the workspace has more than 10,000 entries and the daemon lists only those; some are missing here]\n")
	}
	return b.String()
}
