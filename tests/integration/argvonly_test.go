package integration

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestArgvOnlyRootfs: a rootfs `nsbox rootfs import` marks argv-only (no
// python3) runs commands, and the daemon refuses Python code and sessions
// on it up front with a 400 that names the rootfs and what to do, keeps
// no pool or zygote of Python runners on it (it is the default rootfs here,
// and both are asked for) and lists only bash for it in /v1/info.
func TestArgvOnlyRootfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the store chowns its trees to root, the daemon runs sandboxes")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	// The image's one program: a static binary, no python3, no shell.
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(`package main

import (
	"os"
	"strings"
)

func main() { os.Stdout.WriteString("hello " + strings.Join(os.Args[1:], " ") + "\n") }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(tree, "bin", "hello"), "main.go")
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The sandbox's init, in its user namespace, opens the tree: the
	// store's path must be searchable by others, as /var/lib/nsbox is.
	store := t.TempDir()
	for _, dir := range []string{store, filepath.Dir(store)} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := execNsbox("rootfs", "import", "--store", store, "tools", tree).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "argv-only") {
		t.Fatalf("rootfs import: %v\n%s", err, out)
	}

	d := startDaemon(t, "--rootfs-store", store, "--default-rootfs", "tools", "--pool-size", "1", "--zygote-bare=true")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	res, err := d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"/bin/hello", "from", "argv"}})
	if err != nil || res.Status != agentapi.StatusOK || res.Stdout != "hello from argv\n" {
		t.Fatalf("argv run: %+v, %v", res, err)
	}

	refused := func(what string, err error) {
		t.Helper()
		var ae *agentapi.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !errors.Is(ae.Class, errdefs.ErrInvalidArgument) {
			t.Fatalf("%s: %v, want a 400 invalid_argument", what, err)
		}
		for _, w := range []string{`language: "python" needs python3 3.9 or newer`, `rootfs "tools" is argv-only`, "argv", "nsbox exec --rootfs tools -- CMD"} {
			if !strings.Contains(ae.Message, w) {
				t.Errorf("%s: %q lacks %q", what, ae.Message, w)
			}
		}
	}
	_, err = d.client.Run(ctx, &agentapi.RunRequest{Language: "python", Code: "print(1)"})
	refused("python run", err)
	_, err = d.client.Run(ctx, &agentapi.RunRequest{Language: "python", Code: "print(1)", Rootfs: "tools"})
	refused("python run naming the rootfs", err)
	_, err = d.client.CreateSession(ctx, &agentapi.SessionRequest{})
	refused("session", err)

	info, err := d.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(info.Languages["tools"], ","); got != "bash" {
		t.Errorf("info languages[tools] = %s, want bash", got)
	}
	if len(info.Pools) != 0 || len(info.Zygotes) != 0 {
		t.Errorf("pools %+v, zygotes %+v on an argv-only rootfs: want none", info.Pools, info.Zygotes)
	}
}
