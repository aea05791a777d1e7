package main

import (
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

// TestExecExitCodes: through the daemon, exec exits with the command's
// own code, 128+N for a command signal N ended, and 124/137 for a limit.
func TestExecExitCodes(t *testing.T) {
	tests := []struct {
		name string
		res  agentapi.RunResult
		code int
		msg  string
	}{
		{"own code", agentapi.RunResult{Status: agentapi.StatusExitNonzero, ExitCode: 3}, 3, ""},
		{"SIGTERM", agentapi.RunResult{Status: agentapi.StatusKilled, ExitCode: 143, Signal: "SIGTERM"}, 143, "killed by SIGTERM"},
		{"SIGKILL", agentapi.RunResult{Status: agentapi.StatusKilled, ExitCode: 137, Signal: "SIGKILL"}, 137, "killed by SIGKILL"},
		{"timeout", agentapi.RunResult{Status: agentapi.StatusTimeout, ExitCode: 137, Signal: "SIGKILL"}, exitTimeout, "timeout"},
		{"oom", agentapi.RunResult{Status: agentapi.StatusOOM, ExitCode: 137, Signal: "SIGKILL"}, exitKilled, "out of memory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				res := tc.res
				writeStream(w, agentapi.Event{Type: agentapi.EventResult, Result: &res})
			})
			_, stderr, code := runApp(t, "", "exec", "--socket", sock, "--", "true")
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.msg)
			}
		})
	}
}

// TestExecInterruptedViaDaemon: a Ctrl-C (SIGINT) during a run through the
// daemon exits 130, a SIGTERM 143 (it was 1, "context canceled").
func TestExecInterruptedViaDaemon(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				// The run has started (exec catches the signal by now):
				// the user presses Ctrl-C, and the stream ends with it.
				w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				syscall.Kill(os.Getpid(), sig)
				<-r.Context().Done()
			})
			_, stderr, code := runApp(t, "", "exec", "--socket", sock, "--", "sleep", "60")
			if code != 128+int(sig) || !strings.Contains(stderr, "interrupted") {
				t.Errorf("exit %d, stderr %q; want %d and interrupted", code, stderr, 128+int(sig))
			}
		})
	}
}

// TestExecUsageErrorsExit2: a command line nsbox cannot use exits 2 on
// both paths, before any sandbox: a flag over the maximum (the daemon's
// refusal, or in-process the default daemon's), a profile that is not
// one, binary stdin through the daemon.
func TestExecUsageErrorsExit2(t *testing.T) {
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusBadRequest, agentapi.CodeInvalidArgument, "limits.timeout_ms: 3600000 is above the daemon's maximum 600000")
	})
	bad := t.TempDir() + "/profile.json"
	if err := os.WriteFile(bad, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin any
		args  []string
		msg   string
	}{
		{"over the maximum via the daemon", "", []string{"exec", "--socket", sock, "--timeout", "1h", "--", "true"}, "--timeout 1h: above the daemon's maximum 10m"},
		{"over the maximum in-process", "", []string{"exec", "--no-daemon", "--timeout", "1h", "--", "true"}, "--timeout 1h: above a default daemon's maximum 10m"},
		{"bad seccomp profile", "", []string{"exec", "--socket", sock, "--seccomp-profile", bad, "--", "true"}, "--seccomp-profile " + bad},
		{"binary stdin via the daemon", "\xff\xfe", []string{"exec", "--socket", sock, "--", "cat"}, "binary stdin"},
		{"no command", "", []string{"exec", "--socket", sock}, "no command given"},
		{"tools --format", "", []string{"tools", "--format", "nope"}, "--format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runApp(t, tc.stdin, tc.args...)
			if code != cmdline.ExitUsage || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, cmdline.ExitUsage, tc.msg)
			}
		})
	}
}

// TestExecExitCodesInProcess: in-process, the same codes as through the
// daemon: the command's own; with --init 128+N for its death by signal N
// (its own kill -TERM $$ ends it) where without it the command is pid 1
// and survives; 130 at Ctrl-C.
func TestExecExitCodesInProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("in-process exec needs root")
	}
	store, name := os.Getenv("NSBOX_TEST_ROOTFS_STORE"), os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if store == "" || name == "" {
		t.Skip("NSBOX_TEST_ROOTFS_STORE and NSBOX_TEST_ROOTFS_NAME name no rootfs")
	}
	base := []string{"exec", "--no-daemon", "--store", store, "--rootfs", name}
	tests := []struct {
		name   string
		argv   []string
		code   int
		stdout string
	}{
		{"own code", []string{"--", "sh", "-c", "exit 3"}, 3, ""},
		{"--init kill -TERM $$", []string{"--init", "--", "bash", "-c", "kill -TERM $$; echo survived"}, 143, ""},
		{"--init kill -9 $$", []string{"--init", "--", "sh", "-c", "kill -9 $$; echo survived"}, 137, ""},
		{"--init python3 os.kill", []string{"--init", "--", "python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('survived')"}, 143, ""},
		{"pid 1 ignores kill -TERM $$", []string{"--", "bash", "-c", "kill -TERM $$; echo survived"}, 0, "survived\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runApp(t, "", append(base, tc.argv...)...)
			if code != tc.code || stdout != tc.stdout {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tc.code, tc.stdout)
			}
		})
	}
	t.Run("Ctrl-C", func(t *testing.T) {
		// Once the command has read a megabyte of its stdin, more than the
		// pipes on the way hold, it runs and exec catches signals.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go func() {
			defer w.Close()
			if _, err := w.Write(make([]byte, 1<<20)); err == nil {
				syscall.Kill(os.Getpid(), syscall.SIGINT)
			}
		}()
		_, stderr, code := runApp(t, r, append(base, "--", "sh", "-c", "head -c 1048576 >/dev/null; sleep 60")...)
		if code != exitInterrupted || !strings.Contains(stderr, "interrupted") {
			t.Errorf("exit %d, stderr %q; want %d and interrupted", code, stderr, exitInterrupted)
		}
	})
}
