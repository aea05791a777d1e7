package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// tree is what scan found under a module root.
type tree struct {
	files    []goFile       // non-test, non-generated Go files
	packages map[string]int // directory -> its files' lines
	orphans  []string       // orphaned doc comments, as findings
}

type goFile struct {
	path  string // relative to the root, slash-separated
	lines int
}

// scan reads every Go file under root, leaving out testdata, vendor,
// node_modules and hidden directories.
func scan(root string) (*tree, error) {
	t := &tree{packages: map[string]int{}}
	fset := token.NewFileSet()
	parsed := map[string][]*ast.File{} // directory -> its files
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		n := lineCount(src)
		dir := filepath.ToSlash(filepath.Dir(rel))
		t.files = append(t.files, goFile{rel, n})
		t.packages[dir] += n
		parsed[dir] = append(parsed[dir], f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	dirs := make([]string, 0, len(parsed))
	for d := range parsed {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		names := map[string]bool{}
		for _, f := range parsed[d] {
			declNames(f, names)
		}
		for _, f := range parsed[d] {
			t.orphans = append(t.orphans, orphans(fset, f, names)...)
		}
	}
	return t, nil
}

// lineCount counts lines as wc -l does, plus an unterminated last one.
func lineCount(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// sizeFindings are the files over maxFile lines and the packages over
// maxPkg, largest first.
func (t *tree) sizeFindings(maxFile, maxPkg int) []string {
	var out []string
	files := append([]goFile(nil), t.files...)
	sort.Slice(files, func(i, j int) bool { return files[i].lines > files[j].lines })
	for _, f := range files {
		if f.lines > maxFile {
			out = append(out, fmt.Sprintf("%s:1: file has %d lines, over the budget of %d for a non-test Go file: split it by concern", f.path, f.lines, maxFile))
		}
	}
	dirs := make([]string, 0, len(t.packages))
	for d := range t.packages {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return t.packages[dirs[i]] > t.packages[dirs[j]] })
	for _, d := range dirs {
		if n := t.packages[d]; n > maxPkg {
			out = append(out, fmt.Sprintf("%s/: package has %d non-test lines, over the budget of %d: split it into packages by noun", d, n, maxPkg))
		}
	}
	return out
}
