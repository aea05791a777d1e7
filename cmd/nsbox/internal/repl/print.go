package repl

import (
	"fmt"
	"io"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
)

// PrintChunk writes a cell's streamed output.
func PrintChunk(stdout, stderr io.Writer, ev agentapi.Event) {
	switch ev.Type {
	case agentapi.EventStdout:
		io.WriteString(stdout, ev.Data)
	case agentapi.EventStderr:
		io.WriteString(stderr, ev.Data)
	}
}

// MaxFilesListed is how many of a cell's changed files PrintResult names
// one a line; past it, one line counts the rest (a pip install changes
// thousands).
const MaxFilesListed = 10

// PrintResult prints what a cell returned besides its output. saveFigure,
// when set, keeps a figure and says where (the REPL); without it, and
// without --json, a figure is only named.
func PrintResult(out, errw io.Writer, res *agentapi.RunResult, saveFigure func(i int, f agentapi.Figure) (string, error)) {
	if res.Value != "" {
		fmt.Fprintln(out, res.Value)
	}
	if e := res.Exception; e != nil && e.Traceback != "" {
		fmt.Fprint(errw, e.Traceback)
		if !strings.HasSuffix(e.Traceback, "\n") { // Node's stack has none
			fmt.Fprintln(errw)
		}
	}
	for i, f := range res.Figures {
		if saveFigure == nil {
			fmt.Fprintf(errw, "[figure %d: %s, %d bytes base64; --json prints it]\n", i+1, f.Mime, len(f.DataBase64))
			continue
		}
		if p, err := saveFigure(i, f); err != nil {
			fmt.Fprintf(errw, "[figure %d: %s, not saved: %v]\n", i+1, f.Mime, err)
		} else {
			fmt.Fprintf(errw, "[figure %d: %s, saved to %s]\n", i+1, f.Mime, p)
		}
	}
	for i, f := range res.Files {
		if i == MaxFilesListed && len(res.Files) > MaxFilesListed+1 {
			fmt.Fprintf(errw, "[... and %d more files; --json lists them all]\n", len(res.Files)-i)
			break
		}
		fmt.Fprintf(errw, "[file %s: %d bytes]\n", f.Path, f.Size)
	}
	if res.SessionDead {
		fmt.Fprintln(errw, "[the session is dead]")
	}
}
