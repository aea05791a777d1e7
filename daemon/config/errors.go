package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem with the configuration. Line is its line in the
// config file, 0 when the value came from a default or an override (a flag
// or the environment).
type Error struct {
	Line int
	Key  string
	Msg  string
}

// Errors are all the problems found in a configuration.
type Errors struct {
	File string
	Errs []Error
}

func (e *Errors) Error() string {
	lines := make([]string, 0, len(e.Errs)+1)
	lines = append(lines, fmt.Sprintf("configuration has %d error(s); fix them and run `nsbox daemon --check-config`:", len(e.Errs)))
	for _, ce := range e.Errs {
		lines = append(lines, "  "+ce.Format(e.File))
	}
	return strings.Join(lines, "\n")
}

// Format prints ce as FILE:LINE: key: message, the form editors jump to.
func (ce Error) Format(file string) string {
	var b strings.Builder
	if ce.Line > 0 && file != "" {
		fmt.Fprintf(&b, "%s:%d: ", file, ce.Line)
	}
	if ce.Key != "" {
		b.WriteString(ce.Key + ": ")
	}
	b.WriteString(ce.Msg)
	return b.String()
}

// sortErrors orders errors by line; those without a line come last.
func sortErrors(errs []Error) {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Line, errs[j].Line
		if a == 0 || b == 0 {
			return a != 0 && b == 0
		}
		return a < b
	})
}
