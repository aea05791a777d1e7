package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// checkPython runs the profile's imports in the new tree (chroot, no bytecode
// writes) and returns the Python version.
func checkPython(ctx context.Context, tree string, prof profile) (string, error) {
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "chroot", append([]string{tree, "/usr/bin/python3", "-I", "-B"}, args...)...)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8",
			"MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/.nsbox-check"}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	defer os.RemoveAll(filepath.Join(tree, "tmp/.nsbox-check"))
	out, err := run("--version")
	if err != nil {
		return "", fmt.Errorf("%w: python3 does not run in the new tree: %v: %s", ErrBuildFailed, err, out)
	}
	version := strings.TrimPrefix(out, "Python ")
	if prof.imports != "" {
		if out, err := run("-c", prof.imports); err != nil {
			return "", fmt.Errorf("%w: import check failed in the new tree: %v: %s", ErrBuildFailed, err, lastLine(out))
		}
	}
	return version, nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// nodeCheck is the Node.js smoke test: acorn (what the session runner parses
// cells with, top-level await included) loads from Debian's global module
// dir and parses, and a small program computes.
const nodeCheck = `
const acorn = require("acorn");
const ast = acorn.parse("const x = await Promise.resolve(6 * 7); x", {ecmaVersion: "latest", allowAwaitOutsideFunction: true});
if (ast.body.length !== 2) throw new Error("acorn parsed " + ast.body.length + " statements, want 2");
const m = new Map([["a", 40], ["b", 2]]);
const sum = [...m.values()].reduce((s, v) => s + v, 0);
if (sum !== 42) throw new Error("sum " + sum);
console.log(process.versions.node);
`

// tsCheck is a TypeScript program with a type annotation esbuild must strip.
const tsCheck = "const n: number = 6 * 7;\nconsole.log(n);\n"

// checkNode runs node and, when the profile has it, esbuild in the new
// tree: node -e requiring acorn, and a TypeScript program stripped by
// esbuild --loader=ts and then run by node. node is named by its full path:
// in a chroot without /proc it finds its own path from argv[0], and through
// PATH that would be /bin/node (usrmerge), whose prefix has no
// lib/<arch>/nodejs or share/nodejs, the global module dirs acorn is in.
func checkNode(ctx context.Context, tree string, prof profile) error {
	env := []string{"HOME=/tmp"}
	out, err := chrootCmd(ctx, tree, env, "/usr/bin/node", "-e", nodeCheck).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: node check failed in the new tree (node -e requiring acorn): %v: %s", ErrBuildFailed, err, firstLines(out))
	}
	if !prof.has("esbuild") {
		return nil
	}
	cmd := chrootCmd(ctx, tree, env, "/usr/bin/esbuild", "--loader=ts", "--log-level=warning")
	cmd.Stdin = strings.NewReader(tsCheck)
	js, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%w: TypeScript check failed in the new tree (esbuild --loader=ts): %v: %s", ErrBuildFailed, err, firstLines(stderrOf(err)))
	}
	if strings.Contains(string(js), ": number") {
		return fmt.Errorf("%w: TypeScript check failed in the new tree: esbuild --loader=ts left the type annotation in: %q", ErrBuildFailed, js)
	}
	cmd = chrootCmd(ctx, tree, env, "/usr/bin/node", "-")
	cmd.Stdin = strings.NewReader(string(js))
	out, err = cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		return fmt.Errorf("%w: TypeScript check failed in the new tree: node ran esbuild's output %q: %v: %s", ErrBuildFailed, js, err, firstLines(out))
	}
	return nil
}

// stderrOf returns the captured stderr of a failed exec.Cmd.Output.
func stderrOf(err error) []byte {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return nil
}

// firstLines returns the first five non-empty lines of a failed command's
// output, joined: node prints the failing line and the error's message
// first, its stack below.
func firstLines(out []byte) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(lines) < 5 {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " | ")
}

// checkShell runs script with /bin/sh in the new tree, in a mount and pid
// namespace of its own where the tree has a /proc and the host's /dev
// (a JVM reads both): both mounts go with the namespace.
func checkShell(ctx context.Context, tree, script string) error {
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--pid", "--fork", "--propagation", "private", "/bin/sh", "-c",
		`mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" && exec chroot "$1" /bin/sh -c "$2"`, "sh", tree, script)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: the R and Java check failed in the new tree: %v: %s", ErrBuildFailed, err, lastLine(strings.TrimSpace(string(out))))
	}
	return nil
}
