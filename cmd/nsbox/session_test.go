package main

import (
	"bufio"
	"io"
	"strings"
	"testing"
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
			in := bufio.NewScanner(strings.NewReader(tc.in))
			var got []string
			for {
				cell, ok := readCell(in, io.Discard)
				if !ok {
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
