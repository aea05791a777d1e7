package repl

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/term"
)

func TestReadCell(t *testing.T) {
	tests := []struct {
		name, in string
		cells    []string
	}{
		{"simple lines", "x = 1\nx\n", []string{"x = 1\n", "x\n"}},
		{"block ends on empty line", "def f():\n    return 1\n\nf()\n", []string{"def f():\n    return 1\n\n", "f()\n"}},
		{"open bracket", "d = {\n 'a': 1,\n}\nd\n", []string{"d = {\n 'a': 1,\n}\n", "d\n"}},
		{"bracket in string", "s = '('\ns\n", []string{"s = '('\n", "s\n"}},
		{"triple quote", "s = \"\"\"a\nb\"\"\"\n", []string{"s = \"\"\"a\nb\"\"\"\n"}},
		{"comment colon", "x = 1  # note:\n", []string{"x = 1  # note:\n"}},
		{"backslash", "x = 1 + \\\n 2\n", []string{"x = 1 + \\\n 2\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := newPlainReader(strings.NewReader(tc.in), io.Discard)
			var got []string
			for {
				cell, err := readCell(in)
				if err != nil {
					break
				}
				got = append(got, cell)
			}
			if strings.Join(got, "|") != strings.Join(tc.cells, "|") {
				t.Fatalf("cells %q, want %q", got, tc.cells)
			}
		})
	}
}

// TestReplLineEditing: at a terminal, Ctrl-C drops the line and the
// pending block (an unclosed bracket trapped the prompt on "..."); Up
// recalls history and Left/Right edit.
func TestReplLineEditing(t *testing.T) {
	tests := []struct {
		name, keys string
		want       []string // cells, "^C" for an interrupt
	}{
		{"ctrl-c drops an open bracket", "print((1)\r\x03x = 1\r", []string{"^C", "x = 1\n"}},
		{"ctrl-c mid-line", "abc\x03", []string{"^C"}},
		{"up recalls", "y = 2\r\x1b[A\r", []string{"y = 2\n", "y = 2\n"}},
		{"left inserts", "pint(1)\r\x1b[A\x01\x1b[C" + "r\r", []string{"pint(1)\n", "print(1)\n"}},
		{"tab indents", "if 1:\r\tpass\r\r", []string{"if 1:\n    pass\n\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTermReaderForTest(strings.NewReader(tc.keys))
			var got []string
			for {
				cell, err := readCell(r)
				if errors.Is(err, errInterrupt) {
					got = append(got, "^C")
					continue
				}
				if err != nil {
					break
				}
				got = append(got, cell)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("cells %q, want %q", got, tc.want)
			}
		})
	}
}

// newTermReaderForTest is a termReader on keys that are not a terminal:
// the line editor without raw mode.
func newTermReaderForTest(keys io.Reader) *termReader {
	return newTermReader(-1, keys, io.Discard)
}

// TestReplZeroColumnPty: on a pty that says it has 0 columns the prompt
// echoes a line as a line (the line editor put each character on a line
// of its own), and the line is read whole.
func TestReplZeroColumnPty(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 0, Cols: 0}); err != nil {
		t.Fatal(err)
	}
	// Raw before the line is typed, as the reader makes it: a line
	// written to a cooked tty is echoed by the kernel at once, before any
	// prompt, whatever the reader does.
	st, err := term.MakeRaw(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer term.Restore(int(tty.Fd()), st)
	echoed := make(chan string, 1)
	go func() {
		var buf []byte
		b := make([]byte, 256)
		for !bytes.Contains(buf, []byte("\r\n")) {
			n, err := ptmx.Read(b)
			buf = append(buf, b[:n]...)
			if err != nil {
				break
			}
		}
		echoed <- string(buf)
	}()
	if _, err := ptmx.Write([]byte("print(12345)\r")); err != nil {
		t.Fatal(err)
	}
	r := newTermReader(int(tty.Fd()), tty, tty)
	defer r.Release()
	line, err := r.ReadLine(">>> ")
	if err != nil || line != "print(12345)" {
		t.Fatalf("read %q, %v", line, err)
	}
	if got := <-echoed; !strings.Contains(got, ">>> print(12345)") {
		t.Errorf("echo %q: want the prompt and the line on one line", got)
	}
}
