// Package docs runs the samples of README.md and docs/*.md, so that a
// sample that stops working fails the build (make docs-test; make test runs
// it too). Every ```sh, ```bash, ```console and ```python block runs, each
// with a timeout, unless a marker right above it says why it cannot
// (`<!-- docs-test: skip (REASON) -->`: systemd, Kubernetes, the
// network, installing into the host, a rootfs build); other fences (json,
// toml, js, go, plain) are formats and snippets for other tools, counted
// apart.
//
// Each block runs as a newcomer would run it from a checkout, as root:
//   - in a fresh copy of the repository's tracked files, with bin/nsbox and
//     bin/nsbox-init freshly built and first on PATH, and the files the
//     samples name (data.csv, in.csv, results.csv, traffic.csv) from
//     testdata/; HOME is a temp dir; Python finds the nsbox package on
//     PYTHONPATH, as if installed (docs/PYTHON.md);
//   - in a mount namespace of its own where /etc and /run are overlays of
//     the host's (what the block writes there stays in its temp dir), /tmp
//     is a tmpfs of its own, and
//     /run/nsbox/nsbox.sock is a private daemon's socket (temp paths, a
//     cgroup name of its own, the data-science rootfs "default" as its
//     default, a [[datasets]] entry "census"); with `own daemon` nothing
//     answers there, and a daemon the block starts gets temp paths and a
//     cgroup name of its own from NSBOX_* variables;
//   - with `in a venv`, a fresh venv's bin is first on PATH, so that pip
//     installs into it;
//   - what a `needs PATH` marker names (node_modules, untracked) is linked
//     from the checkout into the copy; without it the block is skipped;
//   - a session id the block uses without making one ($ID, or API.md's
//     example id 86f02983d3908bb6) is a session created for it.
//
// A ```sh block runs under `bash -e -o pipefail`; a ```console block's
// commands are its "# " lines, each must exit 0 or the status its output
// says (`# exit status 124`) and print the output lines shown (but those
// with "…" and JSON); a ```python block runs with python3. After
// each block its processes are killed and the daemon's sessions and
// volumes removed, so the next block starts clean. A failure names the
// block's file:line and shows its output; -v lists every block and the
// summary (run, passed, skipped with reasons).
package docs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// blockTimeout bounds one block; the longest (a venv with the package
// installed, the data-science samples) take well under a minute.
const blockTimeout = 4 * time.Minute

// exampleSession is the session id API.md's samples use.
const exampleSession = "86f02983d3908bb6"

func TestDocs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the samples run sandboxes and a daemon, as README.md says to")
	}
	if testing.Short() {
		t.Skip("runs every doc sample through a daemon; not in -short")
	}
	store, _ := testdaemon.Rootfs(t)
	if name := testdaemon.DataSciRootfs(t); name != "default" {
		t.Skipf("the samples name the data-science rootfs \"default\"; NSBOX_TEST_DATASCI_ROOTFS_NAME is %q", name)
	}
	// The temp dirs (the daemon's socket, each block's copy) are under
	// /var/tmp: a block gets a /tmp of its own.
	t.Setenv("TMPDIR", "/var/tmp")
	root := repoRoot(t)
	blocks, others, err := allBlocks(root)
	if err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	binDir := filepath.Join(tmp, "bin")
	bin, err := testdaemon.Build(root, binDir)
	if err != nil {
		t.Fatal(err)
	}
	checkout := filepath.Join(tmp, "checkout")
	copyCheckout(t, root, checkout, binDir)

	census := filepath.Join(tmp, "census")
	if err := os.MkdirAll(census, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(census, "README"), []byte("a dataset\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(tmp, "nsbox.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "[[datasets]]\nname = \"census\"\npath = %q\n", census), 0o644); err != nil {
		t.Fatal(err)
	}
	d := testdaemon.New(t, bin, "nsboxdocs", "--config", conf, "--default-rootfs", "default")
	d.Start(t)

	r := &runner{root: root, store: store, binDir: binDir, checkout: checkout, daemon: d}
	var ran, passed int
	var skipped []string
	for _, b := range blocks {
		t.Run(b.Name(), func(t *testing.T) {
			if b.Skip == "" {
				for _, need := range b.Needs {
					if _, err := os.Stat(filepath.Join(root, need)); err != nil {
						b.Skip = "needs " + need + ", which make deps installs"
					}
				}
			}
			if b.Skip != "" {
				skipped = append(skipped, fmt.Sprintf("%s:%d (%s)", b.File, b.Line, b.Skip))
				t.Skipf("%s: %s", b.Name(), b.Skip)
			}
			ran++
			r.run(t, b)
			if !t.Failed() {
				passed++
			}
		})
	}
	t.Logf("doc samples: %d blocks of sh, bash, console and python (and %d other fences, not run: json, toml, js, go, plain); of those selected: %d run, %d passed, %d failed, %d skipped:\n  %s",
		len(blocks), others, ran, passed, ran-passed, len(skipped), strings.Join(skipped, "\n  "))
}

type runner struct {
	root     string
	store    string
	binDir   string
	checkout string
	daemon   *testdaemon.Daemon
}

// run runs one block and fails t with its file:line and output.
func (r *runner) run(t *testing.T, b block) {
	tmp := t.TempDir()
	work := filepath.Join(tmp, "work")
	if out, err := exec.Command("cp", "-a", r.checkout, work).CombinedOutput(); err != nil {
		t.Fatalf("copy the checkout: %v\n%s", err, out)
	}
	for _, need := range b.Needs {
		// Linked file by file (cp -l), not by a symlink to the checkout: a
		// checkout under /tmp (a CI clone) is hidden by the block's own
		// /tmp, and the symlink would point at nothing there.
		src, dst := filepath.Join(r.root, need), filepath.Join(work, need)
		if out, err := exec.Command("cp", "-al", src, dst).CombinedOutput(); err != nil {
			_ = os.RemoveAll(dst) // another filesystem: a copy, from scratch
			if out2, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s%s", need, err, out, out2)
			}
		}
	}
	for _, dir := range []string{"home", "state", "run", "etc-up", "etc-work", "run-up", "run-work"} {
		if err := os.MkdirAll(filepath.Join(tmp, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	body, prog := script(b)
	if err := os.WriteFile(filepath.Join(tmp, "block"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	link := "ln -s " + shellQuote(r.daemon.Sock) + " /run/nsbox/nsbox.sock"
	if b.OwnDaemon {
		link = ":"
	}
	setup := strings.Join([]string{
		"set -e",
		"mount -t overlay overlay -o lowerdir=/etc,upperdir=$T/etc-up,workdir=$T/etc-work /etc",
		"mount -t overlay overlay -o lowerdir=/run,upperdir=$T/run-up,workdir=$T/run-work /run",
		"mount -t tmpfs -o mode=1777 tmpfs /tmp",
		"mkdir -p /run/nsbox && rm -f /run/nsbox/nsbox.sock && " + link,
		"cd $T/work",
		"set +e",
	}, "\n") + "\n"
	if b.Venv {
		setup += "/usr/bin/python3 -m venv $T/venv || exit 1; export PATH=$T/venv/bin:$PATH\n"
	}
	for _, bf := range b.Before {
		setup += "( set -e; " + bf + " ) || { echo 'docs-test: the before marker failed: " + strings.ReplaceAll(bf, "'", "") + "'; exit 1; }\n"
	}
	setup += "exec " + prog + " $T/block\n"

	cgName := testdaemon.RandomName("nsboxdocsblk")
	outPath := filepath.Join(tmp, "output")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("bash", "-c", setup)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = []string{
		"T=" + tmp,
		"PATH=" + r.binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + filepath.Join(tmp, "home"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"PYTHONPATH=" + filepath.Join(work, "agentapi/python"),
		"PYTHONDONTWRITEBYTECODE=1",
		"NSBOX_STATE_DIR=" + filepath.Join(tmp, "state"),
		"NSBOX_RUN_DIR=" + filepath.Join(tmp, "run"),
		"NSBOX_ROOTFS_STORE=" + r.store,
		"NSBOX_CGROUP_NAME=" + cgName,
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Unshareflags: syscall.CLONE_NEWNS}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(blockTimeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		runErr = fmt.Errorf("still running after %v: killed", blockTimeout)
		<-done
	}
	if endGroup(cmd.Process.Pid) {
		t.Logf("%s: what the block left running outlived SIGTERM by 30 s: killed", b.Name())
	}
	killLeftovers(t, cgName)
	testdaemon.RemoveCgroups(t, cgName, filepath.Join(tmp, "run"))
	r.clean(t)
	if runErr != nil {
		text, _ := os.ReadFile(outPath)
		t.Errorf("%s:%d (%s): %v\n--- output\n%s", b.File, b.Line, b.Lang, runErr, tail(string(text), 6000))
	}
}

var usesID = regexp.MustCompile(`\$\{?ID\b`)

// script turns a block into the file its interpreter runs, and names it.
func script(b block) (body, prog string) {
	text := b.Text
	prelude := ""
	if b.Lang != "python" && (strings.Contains(text, exampleSession) || usesID.MatchString(text) && !strings.Contains(text, "ID=")) {
		prelude = "ID=$(nsbox session create)\n"
		text = strings.ReplaceAll(text, exampleSession, "$ID")
	}
	switch b.Lang {
	case "python":
		return text, "python3"
	case "console":
		return prelude + consoleScript(text, b.CatFiles), "bash"
	default:
		return "set -e -o pipefail\n" + prelude + text, "bash"
	}
}

var (
	exitNote = regexp.MustCompile(`#\s*exit status (\d+)\s*$`)
	note     = regexp.MustCompile(`\s{2,}#.*$`) // an annotation after the output: "   # exit status 124"
)

// consoleScript runs a transcript's "# " lines, each checked against the
// exit status its output notes (0 when none does) and the output it shows:
// every line the command printed as shown, but those with "…" (elided)
// and JSON (its spacing and values vary), its annotation taken off. With
// catFiles, a `cat FILE` line's output is written to FILE first.
func consoleScript(text string, catFiles bool) string {
	type command struct{ line, want, output string }
	var cmds []command
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if c, ok := strings.CutPrefix(line, "# "); ok {
			cmds = append(cmds, command{line: c, want: "0"})
		} else if len(cmds) > 0 {
			cur := &cmds[len(cmds)-1]
			cur.output += line + "\n"
			if m := exitNote.FindStringSubmatch(line); m != nil {
				cur.want = m[1]
			}
		}
	}
	var s strings.Builder
	for _, c := range cmds {
		s.WriteString("out=$(mktemp)\n") // a file per command: what one left running writes on in its own
		if file, ok := strings.CutPrefix(c.line, "cat "); ok && catFiles && !strings.ContainsAny(file, " |<>;&") {
			fmt.Fprintf(&s, "mkdir -p \"$(dirname %s)\" && printf %%s %s > %s\n", file, shellQuote(c.output), file)
		}
		fmt.Fprintf(&s, "{ %s\n} >\"$out\" 2>&1\nrc=$?; cat \"$out\"\n", c.line)
		fmt.Fprintf(&s, "if [ $rc != %s ]; then echo \"docs-test: exit status $rc, want %s: \"%s; exit 1; fi\n", c.want, c.want, shellQuote(c.line))
		for _, want := range strings.Split(c.output, "\n") {
			want = strings.TrimRight(note.ReplaceAllString(want, ""), " \t")
			if want == "" || strings.Contains(want, "…") || strings.HasPrefix(want, "{") || strings.HasPrefix(want, "[") {
				continue
			}
			fmt.Fprintf(&s, "grep -qF -- %s \"$out\" || { echo \"docs-test: the output of \"%s\" lacks \"%s; exit 1; }\n", shellQuote(want), shellQuote(c.line), shellQuote(want))
		}
	}
	return s.String()
}

// clean removes what a block left in the private daemon: sessions, then
// volumes (a session may hold one).
func (r *runner) clean(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := r.daemon.Client
	ss, err := c.Sessions(ctx)
	if err != nil {
		t.Fatalf("list sessions: %v", err)
	}
	for _, s := range ss {
		if err := c.DeleteSession(ctx, s.ID); err != nil {
			t.Errorf("delete session %s: %v", s.ID, err)
		}
	}
	vs, err := c.Volumes(ctx)
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vs {
		if err := c.DeleteVolume(ctx, v.Name); err != nil {
			t.Errorf("delete volume %s: %v", v.Name, err)
		}
	}
}

// endGroup ends what the block left running in its process group (a
// daemon it started in the background): SIGTERM, and SIGKILL for what is
// still there after 30 s, which it reports.
func endGroup(pgid int) (killed bool) {
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			killed = true
			deadline = time.Now().Add(30 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return killed
}

// killLeftovers kills what a daemon the block started left in its
// sandbox cgroups (named by the block's own cgroup name) when it was
// killed: a frozen pool spare cannot die with its daemon until it is
// thawed.
func killLeftovers(t *testing.T, name string) {
	t.Helper()
	for _, dir := range testdaemon.LeftoverCgroups(t, name) {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
		_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0)
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(procs)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// copyCheckout copies the repository's tracked files under root to dst,
// with bin/ linked to binDir and testdata/'s sample files at its top.
func copyCheckout(t *testing.T, root, dst, binDir string) {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z")
	ls.Dir = root
	list, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, rel), filepath.Join(dst, rel)); err != nil {
			t.Fatalf("copy the checkout: %v", err)
		}
	}
	if err := os.Symlink(binDir, filepath.Join(dst, "bin")); err != nil {
		t.Fatal(err)
	}
	samples, err := filepath.Glob(filepath.Join(root, "tests/docs/testdata/*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(s)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// copyFile copies a file or symlink, keeping its mode; a tracked file
// deleted in the work tree is left out.
func copyFile(src, dst string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, fi.Mode().Perm())
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
