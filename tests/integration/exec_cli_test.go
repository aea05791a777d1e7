package integration

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// runCLI runs nsbox with args and stdin, returning stdout, stderr and the
// exit code.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := execNsbox(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("nsbox %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// forkBomb forks until the pids limit stops it and says how far it got.
const forkBomb = `
import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print("stopped", n, type(e).__name__)
`

// `nsbox exec` goes through the daemon when its socket answers and keeps
// the shell contract: stdin in, output out, the command's exit code, a
// named verdict with 124/137 when a limit ends the run, 2 for a flag over
// the daemon's maximum; with --init, 128+N for a command signal N ended,
// and the pids limit counts the command's processes only.
func TestExecThroughDaemon(t *testing.T) {
	d := startDaemon(t)
	sock := []string{"exec", "--socket", d.sock, "-v"}
	for _, tc := range []struct {
		name, stdin string
		args        []string
		wantOut     string
		wantErr     string
		wantCode    int
	}{
		{"stdin", "print('piped', 6*7)\n", []string{"--", "python3", "-"}, "piped 42\n", "through the daemon", 0},
		{"exit code", "", []string{"--", "sh", "-c", "echo e >&2; exit 7"}, "", "e\n", 7},
		{"timeout", "", []string{"--timeout", "500ms", "--", "sh", "-c", "echo started; sleep 30"}, "started\n", "nsbox: timeout after 500ms", 124},
		{"oom", "", []string{"--memory", "48M", "--", "python3", "-c", "b = bytearray(200 << 20)"}, "", "nsbox: out of memory (limit 48 MiB)", 137},
		{"output limit", "", []string{"--output", "1K", "--", "python3", "-c", "print('x' * 100000)"}, "", "nsbox: output limit of 1 KiB", 137},
		{"above the maximum", "", []string{"--timeout", "1h", "--", "true"}, "", "nsbox: exec: --timeout 1h: above the daemon's maximum 10m", 2},
		{"pid 1 ignores kill -TERM $$", "", []string{"--", "bash", "-c", "kill -TERM $$; echo survived"}, "survived\n", "", 0},
		{"--init kill -TERM $$", "", []string{"--init", "--", "bash", "-c", "kill -TERM $$; echo survived"}, "", "", 143},
		{"--init python3 os.kill", "", []string{"--init", "--", "python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('survived')"}, "", "", 143},
		{"--init fork bomb", "", []string{"--init", "--pids", "16", "--", "python3", "-c", forkBomb}, "stopped 15 ", "", 0},
		{"env and file", "", []string{"--env", "WHO=agent", "--file", "/etc/hostname:in/host.txt", "--", "sh", "-c", "echo $WHO; test -s in/host.txt && echo file"}, "agent\nfile\n", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.stdin, append(sock, tc.args...)...)
			if code != tc.wantCode || !strings.HasPrefix(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
					code, out, errOut, tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
}

// --no-daemon runs in-process even when a daemon answers; a socket that was
// named explicitly but does not answer is an error, not a silent fallback.
func TestExecInProcessAndBadSocket(t *testing.T) {
	d := startDaemon(t)
	store, name := testRootfs(t)
	out, errOut, code := runCLI(t, "", "exec", "--socket", d.sock, "--no-daemon", "-v", "--store", store, "--rootfs", name, "--", "python3", "-c", "print('here')")
	if code != 0 || out != "here\n" || !strings.Contains(errOut, "in-process") {
		t.Errorf("--no-daemon: exit %d stdout %q stderr %q", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "", "exec", "--socket", d.sock+".missing", "--", "true")
	if code == 0 || !strings.Contains(errOut, "no socket there") || !strings.Contains(errOut, d.sock+".missing") {
		t.Errorf("missing socket: exit %d stderr %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "exec", "--socket", d.sock)
	if code == 0 || !strings.Contains(errOut, "no command given") {
		t.Errorf("no command: exit %d stderr %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "exec", "--no-daemon", "--store", store, "--rootfs", "no-such-rootfs", "--", "true")
	if code == 0 || !strings.Contains(errOut, "nsbox rootfs build") {
		t.Errorf("missing rootfs: exit %d stderr %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "exec", "--memory", "lots", "--", "true")
	if code == 0 || !strings.Contains(errOut, "--memory") {
		t.Errorf("bad size: exit %d stderr %q", code, errOut)
	}
}
