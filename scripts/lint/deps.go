package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path"
	"sort"
	"strings"
)

// pkg is one package of the product's dependencies: its path in the
// module ("" for one outside it) and what it imports.
type pkg struct {
	rel     string
	imports []string // module-relative paths of its imports in the module
}

// productDeps lists the module's packages that the main packages mains
// (module-relative, "./cmd/nsbox") link, with their imports.
func productDeps(root string, mains ...string) ([]pkg, error) {
	mod, err := goCmd(root, "list", "-m")
	if err != nil {
		return nil, err
	}
	modPath := strings.TrimSpace(mod)
	out, err := goCmd(root, append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, mains...)...)
	if err != nil {
		return nil, err
	}
	rel := func(p string) string {
		if r, ok := strings.CutPrefix(p, modPath+"/"); ok {
			return r
		}
		return ""
	}
	var pkgs []pkg
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || rel(fields[0]) == "" {
			continue
		}
		p := pkg{rel: rel(fields[0])}
		for _, imp := range fields[1:] {
			if r := rel(imp); r != "" {
				p.imports = append(p.imports, r)
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, sc.Err()
}

func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// notProduct says why a module package (its module-relative path) has no
// place in the product binary, or "" when it has.
func notProduct(rel string) string {
	name := path.Base(rel)
	switch {
	case rel == "scripts" || strings.HasPrefix(rel, "scripts/"):
		return "it is under scripts/ (tools and harnesses)"
	case rel == "tests" || strings.HasPrefix(rel, "tests/"):
		return "it is under tests/"
	case strings.HasPrefix(name, "test") || strings.HasSuffix(name, "test"):
		return "its name says it is a test fixture"
	}
	return ""
}

// depFindings reports each package of deps that notProduct refuses, with
// the packages of the product that import it.
func depFindings(deps []pkg) []string {
	var out []string
	for _, p := range deps {
		why := notProduct(p.rel)
		if why == "" {
			continue
		}
		var by []string
		for _, q := range deps {
			for _, imp := range q.imports {
				if imp == p.rel {
					by = append(by, q.rel)
				}
			}
		}
		sort.Strings(by)
		out = append(out, fmt.Sprintf("%s/: the product (./cmd/nsbox, ./cmd/nsbox-init) links it, imported by %s; %s: move it out of the product's dependencies",
			p.rel, strings.Join(by, ", "), why))
	}
	return out
}
