package mcp

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
)

func pngBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCellResult(t *testing.T) {
	img := pngBytes(t)
	tests := []struct {
		name    string
		res     *agentapi.RunResult
		isError bool
		want    []string
		images  int
	}{
		{"value", &agentapi.RunResult{Status: agentapi.StatusOK, Stdout: "hi\n", Value: "42", ExecutionCount: 2}, false,
			[]string{"status: ok (cell 2)", "--- stdout ---\nhi\n", "--- value ---\n42\n"}, 0},
		{"exception", &agentapi.RunResult{Status: agentapi.StatusException, Exception: &agentapi.Exception{Name: "ValueError", Value: "x", Traceback: "Traceback (most recent call last):\nValueError: x\n"}}, true,
			[]string{"--- exception ---\nTraceback", "ValueError: x"}, 0},
		{"truncated", &agentapi.RunResult{Status: agentapi.StatusOK, Stdout: "abc", StdoutTruncated: true, StdoutBytes: 1000}, false,
			[]string{"[stdout truncated: 1000 bytes produced, the first 3 shown"}, 0},
		{"oom", &agentapi.RunResult{Status: agentapi.StatusOOM, Error: "out of memory", SessionDead: true}, true,
			[]string{"error: out of memory", "ran out of memory (512 MiB)"}, 0},
		{"output limit", &agentapi.RunResult{Status: agentapi.StatusOutputLimit, Stdout: "xx", StdoutTruncated: true, StdoutBytes: 1 << 20,
			Exception: &agentapi.Exception{Name: "KeyboardInterrupt"}}, true,
			[]string{"the output passed the cap of 128 KiB per stream and the code was stopped"}, 0},
		{"figures", &agentapi.RunResult{Status: agentapi.StatusOK, Figures: []agentapi.Figure{
			{Mime: "image/png", DataBase64: base64.StdEncoding.EncodeToString(img)},
			{Mime: "image/png", DataBase64: base64.StdEncoding.EncodeToString(img)},
		}}, false, []string{"[2 figure(s) returned as PNG images]"}, 2},
		{"files", &agentapi.RunResult{Status: agentapi.StatusOK, Files: []agentapi.FileResult{
			{Path: ".cache/matplotlib/fontlist.json", Size: 9}, {Path: "out.csv", Size: 3},
		}}, false, []string{"files created or changed in /workspace:\n  out.csv (3 bytes)\n"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := cellResult(tc.res, []string{"a note"}, facts{memory: 512 << 20, output: 128 << 10})
			if r.IsError != tc.isError {
				t.Errorf("isError %v, want %v", r.IsError, tc.isError)
			}
			text := r.Content[0].(*mcpsdk.TextContent).Text
			for _, w := range append(tc.want, "note: a note") {
				if !strings.Contains(text, w) {
					t.Errorf("text %q lacks %q", text, w)
				}
			}
			if strings.Contains(text, ".cache/") {
				t.Errorf("text lists library caches: %q", text)
			}
			if got := len(r.Content) - 1; got != tc.images {
				t.Fatalf("%d image blocks, want %d", got, tc.images)
			}
			for _, c := range r.Content[1:] {
				ic := c.(*mcpsdk.ImageContent)
				if ic.MIMEType != "image/png" || !bytes.Equal(ic.Data, img) {
					t.Errorf("image block %s, %d bytes", ic.MIMEType, len(ic.Data))
				}
			}
		})
	}
}

func TestFileContent(t *testing.T) {
	img := pngBytes(t)
	long := strings.Repeat("é", maxReadTextBytes)
	tests := []struct {
		name, path string
		data       []byte
		encoding   string
		truncated  bool
		image      bool
	}{
		{"png", "out/plot.png", img, "image", false, true},
		{"png without extension", "plot", img, "image", false, true},
		{"text", "a.csv", []byte("a,b\n1,2\n"), encodingUTF8, false, false},
		{"long text", "a.txt", []byte(long), encodingUTF8, true, false},
		{"binary", "b.bin", []byte{0, 1, 2, 0xff}, encodingBase64, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, out := fileContent(tc.path, tc.data)
			if out.Encoding != tc.encoding || out.Truncated != tc.truncated || out.Bytes != len(tc.data) {
				t.Fatalf("result %+v", out)
			}
			last := r.Content[len(r.Content)-1]
			if ic, ok := last.(*mcpsdk.ImageContent); ok != tc.image {
				t.Fatalf("image block %v, want %v", ok, tc.image)
			} else if ok && (ic.MIMEType != "image/png" || !bytes.Equal(ic.Data, tc.data)) {
				t.Fatalf("image %s %d bytes", ic.MIMEType, len(ic.Data))
			}
			if tc.encoding == encodingUTF8 {
				text := r.Content[0].(*mcpsdk.TextContent).Text
				if !tc.truncated && text != string(tc.data) {
					t.Fatalf("text %q", text)
				}
				if tc.truncated && (!strings.Contains(text, "[truncated:") || !strings.HasPrefix(text, "éé")) {
					t.Fatalf("truncated text ends %q", text[len(text)-120:])
				}
			}
			if tc.encoding == encodingBase64 && !strings.Contains(r.Content[0].(*mcpsdk.TextContent).Text, "AAEC/w==") {
				t.Fatalf("base64 text %q", r.Content[0].(*mcpsdk.TextContent).Text)
			}
		})
	}
}

func TestShellCode(t *testing.T) {
	code := shellCode(`echo "it's" $HOME; exit 2`)
	if strings.Count(code, "\n") != 0 || !strings.HasPrefix(code, "(lambda") {
		t.Fatalf("shell code is not one expression: %s", code)
	}
	tests := []struct {
		res      agentapi.RunResult
		status   string
		exitCode int
	}{
		{agentapi.RunResult{Status: agentapi.StatusOK, Value: "0"}, agentapi.StatusOK, 0},
		{agentapi.RunResult{Status: agentapi.StatusOK, Value: "2"}, agentapi.StatusExitNonzero, 2},
		{agentapi.RunResult{Status: agentapi.StatusOK, Value: "-9"}, agentapi.StatusExitNonzero, -9},
		{agentapi.RunResult{Status: agentapi.StatusTimeout}, agentapi.StatusTimeout, -1},
		{agentapi.RunResult{Status: agentapi.StatusOK, Value: "'x'"}, agentapi.StatusError, 0},
	}
	for _, tc := range tests {
		out := shellFromExec(&tc.res)
		if out.Status != tc.status || out.ExitCode != tc.exitCode {
			t.Errorf("%+v: got %s %d, want %s %d", tc.res, out.Status, out.ExitCode, tc.status, tc.exitCode)
		}
	}
}

// TestExplainShell checks that a shell command stopped by a limit reports
// the limit, whichever way it ran (a session's cell or a per-call run).
func TestExplainShell(t *testing.T) {
	f := facts{memory: 256 << 20, output: 64 << 10}
	interrupted := &agentapi.Exception{Name: "KeyboardInterrupt"}
	tests := []struct {
		name     string
		out      *ShellResult
		exitCode int
		want     string
	}{
		{"session output limit", shellFromExec(&agentapi.RunResult{Status: agentapi.StatusOutputLimit, Exception: interrupted}), -1,
			"the command's output passed the cap of 64 KiB per stream"},
		{"per-call output limit", &ShellResult{Status: agentapi.StatusOutputLimit, ExitCode: 137}, 137, "cap of 64 KiB"},
		{"session oom", shellFromExec(&agentapi.RunResult{Status: agentapi.StatusOOM}), -1, "ran out of memory (256 MiB)"},
		{"per-call oom", &ShellResult{Status: agentapi.StatusOOM, ExitCode: 137}, 137, "ran out of memory (256 MiB)"},
		{"timeout", shellFromExec(&agentapi.RunResult{Status: agentapi.StatusTimeout, Exception: interrupted}), -1, "past its timeout"},
		{"exit code", &ShellResult{Status: agentapi.StatusExitNonzero, ExitCode: 3}, 3, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.explainShell(tc.out)
			if tc.out.ExitCode != tc.exitCode || !strings.Contains(tc.out.Error, tc.want) || strings.Contains(tc.out.Error, "KeyboardInterrupt") {
				t.Errorf("exit code %d, error %q; want %d, %q", tc.out.ExitCode, tc.out.Error, tc.exitCode, tc.want)
			}
		})
	}
}

func TestWorkspacePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a.csv", "a.csv"}, {"/workspace/a/b.csv", "a/b.csv"}, {"./a", "a"}, {"/workspace", ""}, {".", ""}, {"", ""}, {"/workspace/", ""}, {"dir/", "dir"},
	}
	for _, tc := range tests {
		if got, err := workspacePath(tc.in); err != nil || got != tc.want {
			t.Errorf("workspacePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"/etc/passwd", "/workspace2/x", "../etc/passwd", "a/../../b", "a//b"} {
		if _, err := workspacePath(bad); err == nil {
			t.Errorf("workspacePath(%q): no error", bad)
		}
	}
}

// A listing says when it was cut, here or by the daemon, and a whole one
// says nothing.
func TestFileListingSaysWhenCut(t *testing.T) {
	few := []agentapi.WorkspaceFile{{Path: "a"}}
	full := make([]agentapi.WorkspaceFile, maxListedFiles)
	tests := []struct {
		name string
		l    ListFilesResult
		want string
	}{
		{"whole", ListFilesResult{Files: few}, ""},
		{"cut here", ListFilesResult{Files: full, Truncated: true}, "listing cut at 1000 entries"},
		{"cut by the daemon", ListFilesResult{Files: few, Truncated: true}, "the daemon lists only those"},
	}
	for _, tc := range tests {
		got := fileListing(&tc.l)
		if tc.want == "" && strings.Contains(got, "[") || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
