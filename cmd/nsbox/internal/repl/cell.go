package repl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// plainReader reads lines from a pipe or file.
type plainReader struct {
	in     *bufio.Scanner
	prompt io.Writer
}

func newPlainReader(in io.Reader, prompt io.Writer) *plainReader {
	s := bufio.NewScanner(in)
	s.Buffer(make([]byte, 1<<20), 64<<20)
	return &plainReader{in: s, prompt: prompt}
}

func (r *plainReader) ReadLine(prompt string) (string, error) {
	fmt.Fprint(r.prompt, prompt)
	if r.in.Scan() {
		return r.in.Text(), nil
	}
	if err := r.in.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

func (r *plainReader) Release() {}

// readCell reads one cell like Python's prompt: a line, plus continuation
// lines while it opens a block (ends with ':' or a backslash), or brackets or a
// triple-quoted string are open; a block ends on an empty line. At the end
// of the input a pending cell is returned; Ctrl-C drops it (errInterrupt).
func readCell(in lineReader) (string, error) {
	var buf bytes.Buffer
	prompt := ">>> "
	block := false
	for {
		line, err := in.ReadLine(prompt)
		if errors.Is(err, io.EOF) && buf.Len() > 0 {
			return buf.String(), nil
		}
		if err != nil {
			return "", err
		}
		buf.WriteString(line + "\n")
		trimmed := strings.TrimRight(line, " \t")
		if strings.HasSuffix(trimmed, ":") || strings.HasSuffix(trimmed, "\\") {
			block = true
		}
		if needsMore(buf.String()) || (block && trimmed != "") {
			prompt = "... "
			continue
		}
		return buf.String(), nil
	}
}

// needsMore reports whether code has open brackets or an open triple
// quote (a rough scan that skips string literals and comments).
func needsMore(code string) bool {
	depth := 0
	for i := 0; i < len(code); i++ {
		switch ch := code[i]; ch {
		case '#':
			for i < len(code) && code[i] != '\n' {
				i++
			}
		case '"', '\'':
			q := string(ch)
			if strings.HasPrefix(code[i:], q+q+q) {
				end := strings.Index(code[i+3:], q+q+q)
				if end < 0 {
					return true
				}
				i += 3 + end + 2
				continue
			}
			for i++; i < len(code) && code[i] != ch && code[i] != '\n'; i++ {
				if code[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
	}
	return depth > 0 || strings.HasSuffix(strings.TrimRight(code, "\n"), "\\")
}
