package repl

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// newLineReader reads lines with editing and history when in is a
// terminal, and plainly otherwise.
func newLineReader(in *os.File, out io.Writer) lineReader {
	if !term.IsTerminal(int(in.Fd())) {
		return newPlainReader(in, out)
	}
	return newTermReader(int(in.Fd()), in, out)
}

// termReader reads lines from a terminal with golang.org/x/term's line
// editor, in raw mode while it reads. Raw mode turns Ctrl-C into a byte,
// which ctrlCReader catches.
type termReader struct {
	fd    int // the terminal; -1: keys from elsewhere (tests), no mode to set
	t     *term.Terminal
	ctrlC *ctrlCReader

	mu    sync.Mutex
	saved *term.State // the terminal's own mode while raw
}

func newTermReader(fd int, in io.Reader, out io.Writer) *termReader {
	r := &termReader{fd: fd, ctrlC: &ctrlCReader{r: in}}
	r.t = term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{r.ctrlC, out}, "")
	r.t.History = &history{skip: r.ctrlC.pending}
	r.t.AutoCompleteCallback = func(line string, pos int, key rune) (string, int, bool) {
		if key != '\t' {
			return "", 0, false
		}
		return line[:pos] + "    " + line[pos:], pos + 4, true // Tab indents
	}
	return r
}

func (r *termReader) ReadLine(prompt string) (string, error) {
	r.mu.Lock()
	if r.fd >= 0 && r.saved == nil {
		st, err := term.MakeRaw(r.fd)
		if err != nil {
			r.mu.Unlock()
			return "", err
		}
		r.saved = st
	}
	r.mu.Unlock()
	if r.fd >= 0 {
		_ = r.t.SetSize(termSize(r.fd))
	}
	r.t.SetPrompt(prompt)
	line, err := r.t.ReadLine()
	if r.ctrlC.take() {
		return "", errInterrupt
	}
	return line, err
}

// termSize is the terminal's size, 80x24 where it says 0 or cannot say: a
// pty made without a size (some CI runners, `script`, docker exec -t from
// a pipe) says 0 columns, and the line editor then breaks every character
// onto a line of its own.
func termSize(fd int) (w, h int) {
	w, h, err := term.GetSize(fd)
	if err != nil || w <= 0 {
		w = 80
	}
	if err != nil || h <= 0 {
		h = 24
	}
	return w, h
}

func (r *termReader) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.saved != nil {
		_ = term.Restore(r.fd, r.saved)
		r.saved = nil
	}
}

// ctrlCReader passes a raw terminal's input through, except Ctrl-C: it
// becomes Ctrl-E and Enter, which make the line editor return the line,
// and take then reports that the line was interrupted. (x/term's ReadLine
// answers Ctrl-C with io.EOF, like Ctrl-D, and keeps the line.) A read
// stops before a Ctrl-C, so the keys before it are seen first.
type ctrlCReader struct {
	r    io.Reader
	held []byte

	mu  sync.Mutex
	hit bool
}

func (c *ctrlCReader) Read(p []byte) (int, error) {
	if len(c.held) == 0 {
		buf := make([]byte, len(p))
		n, err := c.r.Read(buf)
		if n == 0 {
			return 0, err
		}
		c.held = buf[:n]
	}
	if i := bytes.IndexByte(c.held, 3); i != 0 {
		if i < 0 {
			i = len(c.held)
		}
		n := copy(p, c.held[:i])
		c.held = c.held[n:]
		return n, nil
	}
	c.held = c.held[1:]
	c.mu.Lock()
	c.hit = true
	c.mu.Unlock()
	return copy(p, "\x05\r"), nil
}

// pending reports a Ctrl-C not yet taken.
func (c *ctrlCReader) pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hit
}

// take reports and clears a Ctrl-C.
func (c *ctrlCReader) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := c.hit
	c.hit = false
	return hit
}

// history is the REPL's line history: no empty lines, no line right
// after itself, none that Ctrl-C dropped; at most 1000.
type history struct {
	lines []string // most recent last
	skip  func() bool
}

func (h *history) Add(line string) {
	if strings.TrimSpace(line) == "" || h.skip() || (len(h.lines) > 0 && h.lines[len(h.lines)-1] == line) {
		return
	}
	if len(h.lines) == 1000 {
		h.lines = h.lines[1:]
	}
	h.lines = append(h.lines, line)
}

func (h *history) Len() int { return len(h.lines) }

func (h *history) At(i int) string { return h.lines[len(h.lines)-1-i] }
