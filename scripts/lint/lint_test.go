package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestSizes: files and packages over the budgets are found, with their
// sizes; generated files, tests and testdata count toward neither.
func TestSizes(t *testing.T) {
	tr, err := scan("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	got := tr.sizeFindings(20, 30)
	want := []string{
		"orphan/orphan.go:1: file has 61 lines, over the budget of 20 for a non-test Go file: split it by concern",
		"big/big.go:1: file has 25 lines, over the budget of 20 for a non-test Go file: split it by concern",
		"orphan/: package has 61 non-test lines, over the budget of 30: split it into packages by noun",
		"pkg/: package has 36 non-test lines, over the budget of 30: split it into packages by noun",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sizeFindings(20, 30):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tr.packages["gen"] != 0 || tr.packages["testdata"] != 0 {
		t.Errorf("counted a generated file or testdata: %v", tr.packages)
	}
	if got := tr.sizeFindings(61, 61); len(got) != 0 {
		t.Errorf("at the budgets exactly: %v; want nothing", got)
	}
}

// TestOrphans: each shape of orphaned doc comment in the fixture is found
// at its line, and none of the attached or non-doc comments is.
func TestOrphans(t *testing.T) {
	tr, err := scan("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tr.orphans {
		file, msg, _ := strings.Cut(f, ": ")
		got = append(got, file+" "+strings.Fields(msg)[0]+" "+strings.Fields(msg)[3])
	}
	want := []string{
		"orphan/orphan.go:4 doc Cut",      // a blank line below
		"orphan/orphan.go:8 doc Between",  // a declaration between
		"orphan/orphan.go:13 the Kept",    // a stray first line about Stray
		"orphan/orphan.go:13 doc Stray",   // ... which is cut off from Stray
		"orphan/orphan.go:20 the Renamed", // "renamed" on Renamed
		"orphan/orphan.go:24 doc First",   // inside a const group
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("orphans:\n%s\nwant:\n%s\n(full:\n%s)", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(tr.orphans, "\n"))
	}
}

func TestFirstWord(t *testing.T) {
	for in, want := range map[string]string{
		"Run runs it.":          "Run",
		"A Typed is a type.":    "Typed",
		"The Engine runs.":      "Engine",
		"v1Controllers are":     "v1Controllers",
		"Section: nothing":      "Section",
		"1 is a number":         "",
		"`code` in backquotes":  "",
		"":                      "",
		"go:build linux":        "",
		"ContentTypeJSON, and ": "ContentTypeJSON",
	} {
		if got := firstWord(in); got != want {
			t.Errorf("firstWord(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNotProduct(t *testing.T) {
	for rel, bad := range map[string]bool{
		"scripts/bench":              true,
		"scripts":                    true,
		"tests/internal/testdaemon":  true,
		"daemon/egress/egresstest":   true,
		"container/internal/testenv": true,
		"daemon/egress":              false,
		"container":                  false,
		"agentapi/e2b/envd/process":  false,
		"cmd/nsbox/internal/cmdline": false,
		"daemon/contest/x":           false, // only the package's own name counts
		"rootfs/importer":            false,
	} {
		if got := notProduct(rel) != ""; got != bad {
			t.Errorf("notProduct(%q) = %q; want refused %v", rel, notProduct(rel), bad)
		}
	}
}

// TestDepFindings: a refused package is reported with who imports it.
func TestDepFindings(t *testing.T) {
	deps := []pkg{
		{rel: "cmd/nsbox", imports: []string{"scripts/bench", "daemon"}},
		{rel: "daemon", imports: []string{"daemon/egress/egresstest"}},
		{rel: "scripts/bench", imports: []string{"daemon/egress/egresstest"}},
		{rel: "daemon/egress/egresstest"},
	}
	got := depFindings(deps)
	want := []string{
		"scripts/bench/: the product (./cmd/nsbox, ./cmd/nsbox-init) links it, imported by cmd/nsbox; it is under scripts/ (tools and harnesses): move it out of the product's dependencies",
		"daemon/egress/egresstest/: the product (./cmd/nsbox, ./cmd/nsbox-init) links it, imported by daemon, scripts/bench; its name says it is a test fixture: move it out of the product's dependencies",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("depFindings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := depFindings(deps[1:2]); len(got) != 0 {
		t.Errorf("depFindings of a clean set: %v", got)
	}
}

// TestProductDeps reads the real module: the product links the engine and
// its own packages, with their imports, and nothing outside the module.
func TestProductDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command:", err)
	}
	deps, err := productDeps("../..", "./cmd/nsbox", "./cmd/nsbox-init")
	if err != nil {
		t.Fatal(err)
	}
	byRel := map[string]pkg{}
	for _, p := range deps {
		byRel[p.rel] = p
	}
	for _, want := range []string{"cmd/nsbox", "cmd/nsbox-init", "container", "daemon"} {
		if _, ok := byRel[want]; !ok {
			t.Errorf("productDeps lacks %s", want)
		}
	}
	if !slices.Contains(byRel["cmd/nsbox"].imports, "container") {
		t.Errorf("cmd/nsbox's imports %v lack container", byRel["cmd/nsbox"].imports)
	}
	if _, ok := byRel["scripts/lint"]; ok {
		t.Error("productDeps lists scripts/lint, which no product imports")
	}
}
