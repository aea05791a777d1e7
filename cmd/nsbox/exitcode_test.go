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

// TestExecExitCodesInProcess: in-process, the same codes as through the
// daemon: the command's own, 128+N for its death by signal N (it is not
// pid 1: its own kill -TERM $$ ends it), 130 at Ctrl-C, and a flag over
// the maximum is a usage error.
func TestExecExitCodesInProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("in-process exec needs root")
	}
	store, name := os.Getenv("NSBOX_TEST_ROOTFS_STORE"), os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if store == "" || name == "" {
		t.Skip("NSBOX_TEST_ROOTFS_STORE and NSBOX_TEST_ROOTFS_NAME name no rootfs")
	}
	base := []string{"exec", "--no-daemon", "--store", store, "--rootfs", name, "--"}
	tests := []struct {
		name string
		argv []string
		code int
		msg  string
	}{
		{"own code", []string{"sh", "-c", "exit 3"}, 3, ""},
		{"kill -TERM $$", []string{"bash", "-c", "kill -TERM $$"}, 143, "killed by SIGTERM"},
		{"kill -9 $$", []string{"sh", "-c", "kill -9 $$"}, 137, "killed by SIGKILL"},
		{"python3 os.kill", []string{"python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"}, 143, "killed by SIGTERM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runApp(t, "", append(base, tc.argv...)...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.msg)
			}
		})
	}
	t.Run("over the maximum", func(t *testing.T) {
		_, stderr, code := runApp(t, "", "exec", "--no-daemon", "--timeout", "1h", "--", "true")
		if code != cmdline.ExitUsage || !strings.Contains(stderr, "--timeout 1h: above") {
			t.Errorf("exit %d, stderr %q; want %d", code, stderr, cmdline.ExitUsage)
		}
	})
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
		_, stderr, code := runApp(t, r, append(base, "sh", "-c", "head -c 1048576 >/dev/null; sleep 60")...)
		if code != exitInterrupted || !strings.Contains(stderr, "interrupted") {
			t.Errorf("exit %d, stderr %q; want %d and interrupted", code, stderr, exitInterrupted)
		}
	})
}
