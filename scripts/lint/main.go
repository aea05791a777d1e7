// Command lint checks the budgets `make lint` holds nsbox to, which no
// standard linter checks:
//
//   - a non-test Go file has at most -max-file lines (600);
//   - a package (a directory's non-test Go files) has at most -max-package
//     lines (2,000);
//   - no doc comment is orphaned: a comment that starts with the name of a
//     declaration just below it but is cut off from it (a blank line, or
//     another declaration in between), so that go/doc drops it;
//   - the product (`go list -deps ./cmd/nsbox ./cmd/nsbox-init`) links
//     nothing from scripts/, tests/ or a test fixture package (a name
//     that starts or ends with "test").
//
// Generated files (the standard "// Code generated ... DO NOT EDIT." line)
// count toward neither budget. Every finding is one line, path:line:
// message; the exit status is 1 when there is any.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	root := flag.String("root", ".", "the module's `DIR`")
	maxFile := flag.Int("max-file", 600, "most `LINES` in a non-test Go file")
	maxPkg := flag.Int("max-package", 2000, "most non-test `LINES` in a package")
	noDeps := flag.Bool("no-deps", false, "skip the product dependency check (it runs go list)")
	flag.Parse()

	tree, err := scan(*root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lint: %v\n", err)
		os.Exit(2)
	}
	var findings []string
	findings = append(findings, tree.sizeFindings(*maxFile, *maxPkg)...)
	findings = append(findings, tree.orphans...)
	if !*noDeps {
		deps, err := productDeps(*root, "./cmd/nsbox", "./cmd/nsbox-init")
		if err != nil {
			fmt.Fprintf(os.Stderr, "lint: %v\n", err)
			os.Exit(2)
		}
		findings = append(findings, depFindings(deps)...)
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(os.Stderr, "lint: %d finding(s); the budgets and the dependency rule are in docs/ARCHITECTURE.md (\"Budgets\")\n", len(findings))
		os.Exit(1)
	}
}
