package runner

import "strings"

// Dedent removes a Python cell's leading indentation as IPython does
// (IPython.core.inputtransformer2.leading_indent, which E2B's code
// interpreter runs every cell through): the spaces and tabs that begin
// the first line that is not blank are removed from every line that
// begins with them; other lines are left as they are. Code written
// indented inside something else (a JS template literal, a test's
// triple-quoted string) then runs instead of raising IndentationError.
// Unlike IPython, the blank lines before it are kept, so that line numbers
// in tracebacks are the cell's own. Code whose first line is not indented
// is returned as it is, without a copy.
func Dedent(code string) string {
	rest := code
	for rest != "" {
		line, tail, _ := strings.Cut(rest, "\n")
		if strings.TrimLeft(line, " \t\r\f\v") != "" {
			break
		}
		rest = tail
	}
	n := len(rest) - len(strings.TrimLeft(rest, " \t"))
	if n == 0 {
		return code
	}
	indent := rest[:n]
	var b strings.Builder
	b.Grow(len(code))
	for s := code; ; {
		line, tail, more := strings.Cut(s, "\n")
		b.WriteString(strings.TrimPrefix(line, indent))
		if !more {
			break
		}
		b.WriteByte('\n')
		s = tail
	}
	return b.String()
}
