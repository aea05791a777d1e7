package procs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/procs"
)

func fileCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func readAll(ctx context.Context, a *procs.Agent, p string) ([]byte, error) {
	f, err := a.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func writeFile(ctx context.Context, a *procs.Agent, p string, b []byte) error {
	f, err := a.Create(ctx, p)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestFilesInTheSandbox: the agent's file operations act in the sandbox
// as its user: /tmp (its tmpfs) is written, read, listed, renamed and
// removed; the read-only rootfs reads but refuses a write with the
// kernel's errno; a directory, a FIFO and a device are refused without
// blocking; a file larger than one chunk comes back whole.
func TestFilesInTheSandbox(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB: several chunks both ways
	if err := writeFile(ctx, a, "/tmp/d/e/big.bin", big); err != nil {
		t.Fatalf("write /tmp/d/e/big.bin: %v", err)
	}
	if got, err := readAll(ctx, a, "/tmp/d/e/big.bin"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read back: %d bytes, %v; want %d", len(got), err, len(big))
	}
	e, err := a.Stat(ctx, "/tmp/d/e/big.bin")
	if err != nil || !e.IsRegular() || e.Size != int64(len(big)) || e.Name != "big.bin" {
		t.Fatalf("stat: %+v, %v", e, err)
	}
	if created, err := a.MakeDir(ctx, "/tmp/d/f/g"); err != nil || !created {
		t.Fatalf("mkdir: %v, %v", created, err)
	}
	if created, err := a.MakeDir(ctx, "/tmp/d/f/g"); err != nil || created {
		t.Fatalf("mkdir again: created %v, %v; want false", created, err)
	}
	if err := a.Rename(ctx, "/tmp/d/e/big.bin", "/tmp/d/h/moved.bin"); err != nil {
		t.Fatalf("rename: %v", err)
	}
	list, err := a.ListDir(ctx, "/tmp/d", 2)
	var names []string
	for _, e := range list {
		names = append(names, strings.TrimPrefix(e.Path, "/tmp/d/"))
	}
	if err != nil || !strings.Contains(strings.Join(names, " "), "h/moved.bin") || len(list) != 5 {
		t.Fatalf("list /tmp/d to depth 2: %q, %v; want e, f, f/g, h, h/moved.bin", names, err)
	}
	if err := a.RemoveAll(ctx, "/tmp/d"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := a.Stat(ctx, "/tmp/d"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat after remove: %v, want not exist", err)
	}

	if b, err := readAll(ctx, a, "/etc/passwd"); err != nil || !bytes.Contains(b, []byte("root:")) {
		t.Fatalf("read the rootfs's /etc/passwd: %q, %v", b, err)
	}
	for _, p := range []string{"/etc/nsbox-written", "/usr/bin/python3"} {
		err := writeFile(ctx, a, p, []byte("x"))
		var fe *procs.FileError
		if !errors.As(err, &fe) || (fe.Errno != unix.EROFS && fe.Errno != unix.EACCES) {
			t.Errorf("write %s on the read-only rootfs: %v, want EROFS or EACCES", p, err)
		}
	}
	if err := a.RemoveAll(ctx, "/etc/passwd"); err == nil {
		t.Error("remove /etc/passwd: no error")
	}

	if o := collect(t, start(t, a, sh("mkfifo /tmp/fifo"))); o.end == nil || o.end.ExitCode != 0 {
		t.Fatalf("mkfifo: %+v %s", o.end, o.stderr.String())
	}
	for p, want := range map[string]unix.Errno{"/tmp": unix.EISDIR, "/tmp/fifo": unix.EINVAL, "/dev/zero": unix.EINVAL} {
		if _, err := readAll(ctx, a, p); !errors.Is(err, want) {
			t.Errorf("read %s: %v, want %v", p, err, want)
		}
	}
	if err := writeFile(ctx, a, "/tmp/fifo", []byte("x")); !errors.Is(err, unix.EINVAL) {
		t.Errorf("write the FIFO: %v, want EINVAL", err)
	}
	// A listing that would not fit in one frame (3,000 entries of 4 KiB
	// paths) is refused as too big; the agent goes on.
	long := "/tmp/l/" + strings.Repeat(strings.Repeat("d", 250)+"/", 15)
	mk := "mkdir -p " + long + " && cd " + long + " && i=0; while [ $i -lt 3000 ]; do : > f$i-" + strings.Repeat("x", 80) + "; i=$((i+1)); done"
	if o := collect(t, start(t, a, sh(mk))); o.end == nil || o.end.ExitCode != 0 {
		t.Fatalf("making a deep tree: %+v %s", o.end, o.stderr.String())
	}
	if _, err := a.ListDir(ctx, "/tmp/l", 20); !errors.Is(err, unix.E2BIG) {
		t.Errorf("a listing past the frame: %v, want E2BIG", err)
	}
	if err := a.RemoveAll(ctx, "/tmp/l"); err != nil {
		t.Errorf("the agent after a refused listing: %v", err)
	}
	if b, err := readAll(ctx, a, "/proc/self/status"); err != nil || !bytes.Contains(b, []byte("Uid:")) {
		t.Errorf("read /proc/self/status (size 0, content): %q, %v", b, err)
	}
}

// TestFilesCannotReachTheHost attempts every way out of the sandbox
// through the file operations: a symlink to a host file, "..", the
// /proc/*/root magic links, and a symlink swapped while it is read. The
// agent resolves every path inside the sandbox, so each one finds the
// sandbox's files or nothing; the host's secret is never read, and a
// write through the same ways creates nothing on the host.
func TestFilesCannotReachTheHost(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	hostDir := t.TempDir()
	secret := []byte("host-secret-" + filepath.Base(hostDir))
	hostFile := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(hostFile, secret, 0o644); err != nil {
		t.Fatal(err)
	}
	shadow, _ := os.ReadFile("/etc/shadow") // the host's; the sandbox's is the rootfs's
	if o := collect(t, start(t, a, sh("ln -s "+hostFile+" /tmp/esc && ln -s /etc/shadow /tmp/shadow && ln -s /proc/1/root"+hostDir+" /tmp/rootdir"))); o.end == nil || o.end.ExitCode != 0 {
		t.Fatalf("making the links: %+v %s", o.end, o.stderr.String())
	}
	tries := []string{
		"/tmp/esc", "/tmp/shadow", "/tmp/rootdir/secret", "/etc/shadow",
		"/tmp/../../../../" + hostFile, "/../../" + hostFile,
		"/proc/1/root" + hostFile, "/proc/self/root" + hostFile, "/proc/self/cwd/../../.." + hostFile,
		"/proc/" + strconv.Itoa(os.Getpid()) + "/root" + hostFile, // the host's pid of this test
	}
	for _, p := range tries {
		b, err := readAll(ctx, a, p)
		if bytes.Contains(b, secret) || (len(shadow) > 0 && bytes.Equal(b, shadow)) {
			t.Errorf("read %s: got the host's file", p)
		}
		if err == nil && p != "/tmp/shadow" && p != "/etc/shadow" {
			t.Errorf("read %s: %q, want an error (no such file in the sandbox)", p, b)
		}
		if e, err := a.Stat(ctx, p); err == nil && !e.IsSymlink() && e.Size == int64(len(secret)) {
			t.Errorf("stat %s: %+v, the host file's size", p, e)
		}
	}
	for _, p := range []string{"/tmp/esc", "/tmp/rootdir/new", "/proc/1/root" + hostDir + "/new", "/tmp/../.." + hostDir + "/new"} {
		_ = writeFile(ctx, a, p, []byte("from the sandbox"))
	}
	if b, _ := os.ReadFile(hostFile); !bytes.Equal(b, secret) {
		t.Errorf("the host's file now holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "new")); err == nil {
		t.Error("a write from the sandbox made a file in the host's directory")
	}
	if l, _ := a.ListDir(ctx, "/proc/1/root"+hostDir, 1); len(l) > 0 {
		t.Errorf("listed the host's directory through /proc/1/root: %+v", l)
	}

	// A symlink swapped to the host's file and back while it is read:
	// every read gets the sandbox's file or an error, never the host's.
	swap := sh("echo sandbox > /tmp/real; while :; do ln -sfn " + hostFile + " /tmp/swap; ln -sfn /tmp/real /tmp/swap; done")
	swap.Tag = "swap"
	p := start(t, a, swap)
	done := make(chan *output)
	go func() { done <- collect(t, p) }()
	for range 300 {
		b, err := readAll(ctx, a, "/tmp/swap")
		if bytes.Contains(b, secret) {
			t.Fatal("read the host's file through a swapped symlink")
		}
		if err == nil && string(b) != "sandbox\n" {
			t.Fatalf("read /tmp/swap: %q", b)
		}
	}
	if err := a.Signal(ctx, procs.Selector{Tag: "swap"}, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
}
