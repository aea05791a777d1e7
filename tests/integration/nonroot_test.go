package integration

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNonRootAdvice runs the CLI and the Python client as uid 65534
// against a daemon socket it may not use (mode 0600, root's), one that
// answers, and none: each says what this user can do. They contradicted
// each other: exec offered --no-daemon, which needs root; doctor said
// "nsbox cannot run here" to a user who only needs the socket; the Python
// client asked "Is it running?" of a daemon that was.
func TestNonRootAdvice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: it runs the CLI as another uid and makes a socket that uid may not use")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	const nobody = 65534
	dir, err := os.MkdirTemp("", "nsbox-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "nsbox")
	if out, err := exec.Command("cp", nsboxBin, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	py := filepath.Join(dir, "py")
	if out, err := exec.Command("cp", "-r", filepath.Join(repoRoot, "agentapi", "python"), py).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	listen := func(name string, mode os.FileMode) string {
		sock := filepath.Join(dir, name)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(sock, mode); err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status":"ok","api_version":"v1"}`))
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return sock
	}
	profile, err := filepath.Abs(filepath.Join(repoRoot, "seccomp", "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Debian's: a python3 under /root (pyenv's) is not for uid 65534.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil && os.Getenv("CI") == "" {
		python = ""
	}
	closed := listen("closed.sock", 0o600) // root's: EACCES for uid 65534
	open := listen("open.sock", 0o666)
	none := filepath.Join(dir, "none.sock")

	asNobody := func(t *testing.T, name string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "PYTHONPATH=" + py, "PYTHONDONTWRITEBYTECODE=1"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(out), code
	}
	check := func(t *testing.T, out string, code, wantCode int, want, unwanted []string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("exit %d, want %d:\n%s", code, wantCode, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		for _, u := range unwanted {
			if strings.Contains(out, u) {
				t.Errorf("output says %q:\n%s", u, out)
			}
		}
	}

	t.Run("exec, a socket it may not use", func(t *testing.T) {
		out, code := asNobody(t, bin, "exec", "--socket", closed, "--", "true")
		check(t, out, code, 1, []string{"permission denied", "usermod -aG nsbox", "without a daemon, a sandbox needs root"},
			[]string{"use --no-daemon"})
	})
	t.Run("exec, no daemon", func(t *testing.T) {
		out, code := asNobody(t, bin, "exec", "--socket", none, "--", "true")
		check(t, out, code, 1, []string{"no such file or directory", "start the daemon", "without a daemon, a sandbox needs root"},
			[]string{"use --no-daemon"})
	})
	t.Run("exec, --seccomp-profile through a daemon", func(t *testing.T) {
		out, code := asNobody(t, bin, "exec", "--socket", open, "--seccomp-profile", profile, "--", "true")
		check(t, out, code, 2, []string{"--seccomp-profile applies to in-process runs only; add --no-daemon as root"}, nil)
	})
	t.Run("doctor, a socket it may not use", func(t *testing.T) {
		out, code := asNobody(t, bin, "doctor", "--socket", closed, "--store", dir)
		check(t, out, code, 1, []string{"uid 65534 cannot run sandboxes here yet: it needs a daemon's socket it may use", "usermod -aG nsbox"},
			[]string{"nsbox cannot run here"})
	})
	t.Run("doctor, a socket that answers", func(t *testing.T) {
		out, code := asNobody(t, bin, "doctor", "--socket", open, "--store", dir)
		check(t, out, code, 0, []string{"nsbox can run here for uid 65534, through the daemon at " + open}, []string{"cannot run"})
	})
	t.Run("python client, a socket it may not use", func(t *testing.T) {
		if python == "" {
			t.Skip("requires /usr/bin/python3 (Debian's; make deps installs it)")
		}
		out, _ := asNobody(t, python, "-c", "import nsbox\ntry:\n    nsbox.Client(socket_path='"+closed+"').health()\nexcept nsbox.DaemonUnreachable as e:\n    print('unreachable:', e)\n")
		check(t, out, 0, 0, []string{"unreachable:", "permission denied for uid 65534", "usermod -aG nsbox"}, []string{"Is it running?"})
		out, _ = asNobody(t, python, "-c", "import asyncio, nsbox.aio\nasync def main():\n    try:\n        await nsbox.aio.AsyncClient(socket_path='"+closed+"').health()\n    except nsbox.DaemonUnreachable as e:\n        print('unreachable:', e)\nasyncio.run(main())\n")
		check(t, out, 0, 0, []string{"unreachable:", "permission denied for uid 65534", "usermod -aG nsbox"}, []string{"Is it running?"})
	})
	t.Run("python client, no daemon", func(t *testing.T) {
		if python == "" {
			t.Skip("requires /usr/bin/python3 (Debian's; make deps installs it)")
		}
		out, _ := asNobody(t, python, "-c", "import nsbox\ntry:\n    nsbox.Client(socket_path='"+none+"').health()\nexcept nsbox.DaemonUnreachable as e:\n    print('unreachable:', e)\n")
		check(t, out, 0, 0, []string{"unreachable:", "Is it running?", "systemctl start nsbox.socket"}, []string{"permission denied"})
	})
}
