package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// repoRoot is the repository, relative to this package.
const repoRoot = "../.."

// daemonArgs returns `nsbox daemon` arguments on temp paths and a unique
// cgroup name, serving sock.
func daemonArgs(t *testing.T, sock string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon runs sandboxes")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	store, name := testRootfs(t)
	tmp := t.TempDir()
	return []string{"daemon", "--socket", sock, "--state-dir", filepath.Join(tmp, "state"), "--run-dir", filepath.Join(tmp, "run"),
		"--rootfs-store", store, "--default-rootfs", name, "--cgroup-name", randomName("nsbox-it-"), "--log-level", "debug"}
}

// startProcess starts cmd with its output in a buffer, kills it at cleanup
// and returns a channel closed when it has exited.
func startProcess(t *testing.T, cmd *exec.Cmd) (*lockedBuffer, <-chan struct{}) {
	t.Helper()
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("process log:\n%s", log)
		}
	})
	return log, exited
}

func waitExit(t *testing.T, exited <-chan struct{}) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon did not exit within 60s")
	}
}

// TestSocketActivation: systemd-socket-activate (what systemd does for
// nsbox.socket) binds the socket, starts the daemon on the first
// connection and hands it the socket; the daemon serves it, takes its lock
// and leaves the socket file in place when it stops.
func TestSocketActivation(t *testing.T) {
	tool, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("requires systemd-socket-activate (Debian package systemd): ", err)
	}
	sock := filepath.Join(t.TempDir(), "act.sock")
	args := daemonArgs(t, filepath.Join(t.TempDir(), "unused.sock"))
	cmd := exec.Command(tool, append([]string{"-l", sock, nsboxBin}, args...)...)
	log, exited := startProcess(t, cmd)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd-socket-activate did not create %s", sock)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The first connection starts the daemon; it waits in the backlog. The
	// socket file exists from bind(2) on, a moment before listen(2): a
	// connection in between is refused, so that one is tried again.
	cl := &client.Client{Socket: sock}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, err := cl.Health(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
			t.Fatalf("health over the activated socket: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := cl.Run(ctx, pythonRun("print(6*7)"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "ok" || res.Stdout != "42\n" {
		t.Errorf("run = %+v", res)
	}
	if !strings.Contains(log.String(), "socket_activated=true") || !strings.Contains(log.String(), sock) {
		t.Errorf("the daemon does not say it serves the activated socket %s:\n%s", sock, log)
	}

	// A second daemon on the same path refuses: it cannot take the lock.
	second := exec.Command(nsboxBin, daemonArgs(t, sock)...)
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another nsbox daemon is serving") {
		t.Errorf("a second daemon on %s: err %v, output:\n%s", sock, err, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, exited)
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket file after the daemon stopped: %v (systemd owns it; the daemon must leave it)", err)
	}
}

// TestSdNotify: with NOTIFY_SOCKET set (Type=notify), the daemon sends
// READY=1 once it serves, RELOADING=1 and READY=1 around a SIGHUP reload,
// and STOPPING=1 on SIGTERM.
func TestSdNotify(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	args := daemonArgs(t, sock)
	nsock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	expect := func(state string) string {
		t.Helper()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("notify socket closed before %s", state)
				}
				for _, line := range strings.Split(m, "\n") {
					if line == state {
						return m
					}
				}
				t.Logf("notify: %q (waiting for %s)", m, state)
			case <-time.After(60 * time.Second):
				t.Fatalf("no %s on NOTIFY_SOCKET within 60s", state)
			}
		}
	}

	cmd := exec.Command(nsboxBin, args...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+nsock)
	_, exited := startProcess(t, cmd)
	if m := expect("READY=1"); !strings.Contains(m, "STATUS=serving on "+sock) {
		t.Errorf("READY message %q lacks STATUS=serving on %s", m, sock)
	}
	// READY comes once the socket is bound: the daemon answers.
	if _, err := (&client.Client{Socket: sock}).Health(context.Background()); err != nil {
		t.Errorf("health after READY=1: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	expect("RELOADING=1")
	expect("READY=1")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expect("STOPPING=1")
	waitExit(t, exited)
}

// TestReloadConfig: SIGHUP applies limits and profiles live, names the
// settings that need a restart, and rejects a bad file as a whole (each
// error logged with its line) while the daemon keeps its configuration.
func TestReloadConfig(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nsbox.conf")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("[default_limits]\npids = 50\n\n[profiles.custom]\nmemory = \"100M\"\n")
	d := startDaemon(t, "--config", conf)
	ctx := context.Background()
	info, err := d.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.DefaultLimits.Pids != 50 || !hasProfile(info.Profiles, "custom") {
		t.Fatalf("info at start: pids %d, profiles %+v; want 50 and custom", info.DefaultLimits.Pids, info.Profiles)
	}

	hup := func() {
		t.Helper()
		if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write("max_concurrent = 1\n[default_limits]\npids = 40\n[sessions]\nmax = 1\nidle_timeout = \"1m\"\n")
	hup()
	waitFor(t, "the reload to apply", func() bool {
		info, err = d.client.Info(ctx)
		return err == nil && info.DefaultLimits.Pids == 40
	})
	if hasProfile(info.Profiles, "custom") {
		t.Errorf("profile custom still listed after the reload removed it: %+v", info.Profiles)
	}
	waitFor(t, "the restart warning", func() bool {
		return strings.Contains(d.log.String(), "take effect only after a restart") && strings.Contains(d.log.String(), "keys=max_concurrent")
	})
	if info.MaxConcurrent == 1 {
		t.Errorf("max_concurrent changed live; it needs a restart")
	}
	res, err := d.client.Run(ctx, pythonRun("import os; print(os.cpu_count() > 0)"))
	if err != nil || res.Status != "ok" {
		t.Fatalf("run after reload: %+v, %v", res, err)
	}
	// [sessions] applies live, to sessions created afterwards.
	sess, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil || sess.IdleTimeoutMs != 60000 {
		t.Fatalf("session after reload: %+v, %v; want the reloaded idle timeout 60000 ms", sess, err)
	}
	var ae *agentapi.Error
	if _, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{}); !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Errorf("second session with [sessions] max = 1 reloaded: %v, want 429", err)
	}
	if err := d.client.DeleteSession(ctx, sess.ID); err != nil {
		t.Error(err)
	}

	write("[default_limits]\npids = 30\nmemory = \"lots\"\n[nope]\n")
	hup()
	waitFor(t, "the bad config to be rejected", func() bool {
		return strings.Contains(d.log.String(), "reload: configuration rejected")
	})
	for _, want := range []string{conf + ":3: default_limits.memory", conf + ":4: nope"} {
		if !strings.Contains(d.log.String(), want) {
			t.Errorf("reload log lacks %q", want)
		}
	}
	if info, err = d.client.Info(ctx); err != nil || info.DefaultLimits.Pids != 40 {
		t.Errorf("after a rejected reload: pids %d, err %v; want the running 40", info.DefaultLimits.Pids, err)
	}
}

// TestCheckConfig: --check-config prints every error with FILE:LINE and
// exits 1, or says OK and exits 0, without starting anything.
func TestCheckConfig(t *testing.T) {
	if nsboxBin == "" {
		t.Skip("requires root: TestMain builds the binary only as root")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("queue = -2\nlog_level = \"loud\"\n[default_limits]\ncpus = \"two\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execNsbox("daemon", "--config", bad, "--check-config").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1; output:\n%s", err, out)
	}
	for _, want := range []string{bad + ":1: queue", bad + ":2: log_level", bad + ":4: default_limits.cpus", "3 error(s)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = execNsbox("daemon", "--config", filepath.Join(repoRoot, "scripts", "nsbox.conf.example"), "--check-config").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration OK") {
		t.Errorf("the shipped example: %v\n%s", err, out)
	}
}

// TestSystemdUnitsVerify: systemd-analyze verify accepts the units.
func TestSystemdUnitsVerify(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("requires systemd-analyze (Debian package systemd): ", err)
	}
	bin := nsboxBin
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"nsbox.service", "nsbox.socket"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		// verify checks that ExecStart exists: point it at a real binary.
		data = []byte(strings.ReplaceAll(string(data), "/usr/local/bin/nsbox", bin))
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(tool, "verify", filepath.Join(dir, "nsbox.service"), filepath.Join(dir, "nsbox.socket")).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func hasProfile(ps []agentapi.Profile, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

func pythonRun(code string) *agentapi.RunRequest {
	return &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code}
}

// waitFor polls cond until it holds, failing after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
