package repl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestPrintResultCapsFiles: a cell that changed thousands of files (a pip
// install) names the first MaxFilesListed and counts the rest on one line.
func TestPrintResultCapsFiles(t *testing.T) {
	tests := []struct {
		files, lines int
		more         string
	}{
		{0, 0, ""},
		{MaxFilesListed, MaxFilesListed, ""},
		{MaxFilesListed + 1, MaxFilesListed + 1, ""}, // "1 more" would take a line too
		{2500, MaxFilesListed + 1, fmt.Sprintf("[... and %d more files; --json lists them all]", 2500-MaxFilesListed)},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.files), func(t *testing.T) {
			res := &agentapi.RunResult{}
			for i := range tc.files {
				res.Files = append(res.Files, agentapi.FileResult{Path: fmt.Sprintf("site-packages/f%d.py", i), Size: 1})
			}
			var out, errw strings.Builder
			PrintResult(&out, &errw, res, nil)
			lines := strings.Split(strings.TrimSuffix(errw.String(), "\n"), "\n")
			if errw.Len() == 0 {
				lines = nil
			}
			if len(lines) != tc.lines {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), tc.lines, errw.String())
			}
			if tc.more != "" && lines[len(lines)-1] != tc.more {
				t.Errorf("last line %q, want %q", lines[len(lines)-1], tc.more)
			}
			if tc.files > 0 && lines[0] != "[file site-packages/f0.py: 1 bytes]" {
				t.Errorf("first line %q", lines[0])
			}
		})
	}
}

// TestPrintResultTracebackNewline: a JavaScript stack (no final newline)
// ends its line, so the shell's prompt does not follow it on the same
// line; Python's traceback is printed as is.
func TestPrintResultTracebackNewline(t *testing.T) {
	for _, tb := range []string{"Error: boom\n    at <anonymous>:1:7", "Traceback (most recent call last):\nValueError: x\n"} {
		var out, errw strings.Builder
		PrintResult(&out, &errw, &agentapi.RunResult{Exception: &agentapi.Exception{Traceback: tb}}, nil)
		if want := strings.TrimSuffix(tb, "\n") + "\n"; errw.String() != want {
			t.Errorf("printed %q, want %q", errw.String(), want)
		}
	}
}
