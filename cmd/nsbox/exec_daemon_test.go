package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

func okStream(w http.ResponseWriter, out string) {
	writeStream(w, agentapi.Event{Type: agentapi.EventStdout, Data: out},
		agentapi.Event{Type: agentapi.EventResult, Result: &agentapi.RunResult{Status: agentapi.StatusOK, Stdout: out}})
}

// TestExecWaitsWhenFull: a daemon that answers 429 with Retry-After gets
// the run again after that long; the run then goes through.
func TestExecWaitsWhenFull(t *testing.T) {
	var log requestLog
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/runs" {
			http.NotFound(w, r)
			return
		}
		if log.add(r, nil) == 1 {
			w.Header().Set("Retry-After", "1")
			writeAPIError(w, http.StatusTooManyRequests, agentapi.CodeResourceExhausted, "2 runs in flight and 4 queued")
			return
		}
		okStream(w, "hi\n")
	})
	start := time.Now()
	stdout, stderr, code := runApp(t, "", "exec", "--socket", sock, "--", "echo", "hi")
	if code != 0 || stdout != "hi\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("retried after %s, before the Retry-After of 1s", took)
	}
	if n := len(log.list()); n != 2 {
		t.Errorf("%d run requests, want 2", n)
	}
	if !strings.Contains(stderr, "the daemon is full; waiting") {
		t.Errorf("stderr does not say it waits:\n%s", stderr)
	}
}

// TestExecGivesUpWhenFull: with --no-wait, or when the daemon stays full
// past the bound, exec exits 75 (not 1, the command's own failure).
func TestExecGivesUpWhenFull(t *testing.T) {
	old := maxBusyWait
	maxBusyWait = 1500 * time.Millisecond
	t.Cleanup(func() { maxBusyWait = old })
	for _, tc := range []struct {
		name  string
		flags []string
		reqs  int
	}{
		{"no-wait", []string{"--no-wait"}, 1},
		{"bounded", nil, 3}, // at 0s, 1s and 1.5s
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log requestLog
			sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				log.add(r, nil)
				w.Header().Set("Retry-After", "1")
				writeAPIError(w, http.StatusTooManyRequests, agentapi.CodeResourceExhausted, "full")
			})
			args := append(append([]string{"exec", "--socket", sock}, tc.flags...), "--", "true")
			_, stderr, code := runApp(t, "", args...)
			if code != exitBusy {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitBusy, stderr)
			}
			if n := len(log.list()); n != tc.reqs {
				t.Errorf("%d requests, want %d", n, tc.reqs)
			}
		})
	}
}

// TestExecLimitErrorNamesFlag: the daemon's field errors come back about
// the flag as typed.
func TestExecLimitErrorNamesFlag(t *testing.T) {
	tests := []struct {
		flag, value, field, msg, want string
	}{
		{"--timeout", "1h", "limits.timeout_ms", "3600000 is above the daemon's maximum 600000", "--timeout 1h: above the daemon's maximum 10m"},
		{"--memory", "16G", "limits.memory_bytes", "17179869184 is above the daemon's maximum 8589934592", "--memory 16G: above the daemon's maximum 8 GiB"},
		{"--cpus", "100", "limits.cpus", "100 is above the daemon's maximum 2", "--cpus 100: above the daemon's maximum 2"},
		{"--pids", "9", "limits.pids", "something else", "--pids 9: something else"},
	}
	for _, tc := range tests {
		t.Run(tc.flag, func(t *testing.T) {
			sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				writeAPIError(w, http.StatusBadRequest, agentapi.CodeInvalidArgument, tc.field+": "+tc.msg)
			})
			_, stderr, code := runApp(t, "", "exec", "--socket", sock, tc.flag, tc.value, "--", "true")
			if code != cmdline.ExitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, tc.field) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, cmdline.ExitUsage, tc.want)
			}
		})
	}
}

// TestFlagsAfterArguments: flags after the positional arguments are read
// as flags (`session rm ID --socket S` deleted a session named --socket).
func TestFlagsAfterArguments(t *testing.T) {
	var log requestLog
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		log.add(r, body)
		switch r.Method + " " + r.URL.Path {
		case "DELETE /v1/sessions/s1":
			w.WriteHeader(http.StatusNoContent)
		case "POST /v1/sessions/s1/exec":
			writeJSON(w, http.StatusOK, agentapi.RunResult{Status: agentapi.StatusOK, Value: "2"})
		default:
			writeAPIError(w, http.StatusNotFound, agentapi.CodeNotFound, r.URL.Path)
		}
	})
	if _, stderr, code := runApp(t, "", "session", "rm", "s1", "--socket", sock); code != 0 {
		t.Fatalf("session rm: exit %d:\n%s", code, stderr)
	}
	stdout, stderr, code := runApp(t, "", "session", "exec", "s1", "1+1", "--json", "--socket", sock)
	if code != 0 {
		t.Fatalf("session exec: exit %d:\n%s", code, stderr)
	}
	var res agentapi.RunResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Value != "2" {
		t.Errorf("session exec --json printed %q (%v)", stdout, err)
	}
	want := []string{"DELETE /v1/sessions/s1", "POST /v1/sessions/s1/exec"}
	if got := log.list(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("requests %q, want %q", got, want)
	}
}

// TestSessionExecExitStatus: session exec exits as exec does.
func TestSessionExecExitStatus(t *testing.T) {
	tests := []struct {
		status string
		code   int
	}{
		{agentapi.StatusOK, 0},
		{agentapi.StatusException, 1},
		{agentapi.StatusTimeout, exitTimeout},
		{agentapi.StatusOOM, exitKilled},
		{agentapi.StatusOutputLimit, exitKilled},
	}
	for _, tc := range tests {
		t.Run(tc.status, func(t *testing.T) {
			sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				res := &agentapi.RunResult{Status: tc.status}
				if r.Header.Get("Accept") == agentapi.ContentTypeNDJSON {
					writeStream(w, agentapi.Event{Type: agentapi.EventResult, Result: res})
					return
				}
				writeJSON(w, http.StatusOK, res)
			})
			for _, json := range []bool{false, true} {
				args := []string{"session", "exec", "--socket", sock, "s1", "x"}
				if json {
					args = append(args, "--json")
				}
				if _, stderr, code := runApp(t, "", args...); code != tc.code {
					t.Errorf("json=%v: exit %d, want %d; stderr:\n%s", json, code, tc.code, stderr)
				}
			}
		})
	}
}

// TestSessionCreateFlags: session create takes exec's limit flags, --env,
// --file and --language.
func TestSessionCreateFlags(t *testing.T) {
	var got agentapi.SessionRequest
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		writeJSON(w, http.StatusCreated, agentapi.Session{ID: "s1"})
	})
	f := t.TempDir() + "/data.csv"
	if err := writeFile(f, "a,b\n"); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runApp(t, "", "session", "create", "--socket", sock, "--rootfs", "minimal", "--timeout", "5s", "--memory", "256M",
		"--pids", "32", "--cpus", "0.5", "--disk", "64M", "--output", "1M", "--env", "A=1", "--file", f+":in/data.csv", "--language", "javascript")
	if code != 0 || stdout != "s1\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	want := agentapi.Limits{TimeoutMs: 5000, MemoryBytes: 256 << 20, Pids: 32, CPUs: 0.5, DiskBytes: 64 << 20, OutputBytes: 1 << 20}
	if got.Limits == nil || *got.Limits != want || got.Rootfs != "minimal" || got.Env["A"] != "1" || got.Language != "javascript" ||
		len(got.Files) != 1 || got.Files[0].Path != "in/data.csv" {
		t.Errorf("request %+v (limits %+v)", got, got.Limits)
	}
}

// TestSessionListLanguage: session ls has a LANGUAGE column, each
// session's language under it.
func TestSessionListLanguage(t *testing.T) {
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, agentapi.SessionList{Sessions: []agentapi.Session{
			{ID: "s1", Rootfs: "default", Language: "python", State: agentapi.SessionIdle},
			{ID: "s2", Rootfs: "default", Language: "typescript", State: agentapi.SessionBusy},
		}})
	})
	stdout, stderr, code := runApp(t, "", "session", "ls", "--socket", sock)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout:\n%s", stdout)
	}
	col := strings.Index(lines[0], "LANGUAGE")
	if col < 0 {
		t.Fatalf("no LANGUAGE column:\n%s", stdout)
	}
	for i, want := range []string{"python", "typescript"} {
		if !strings.HasPrefix(lines[i+1][col:], want+" ") {
			t.Errorf("line %q: want %s under LANGUAGE", lines[i+1], want)
		}
	}
}

// TestExecTerminalStdin: `nsbox exec -- python3` at a terminal said
// nothing and exited 0 (the terminal stdin was dropped); it now points to
// nsbox repl, and a command that does not read a program still runs.
func TestExecTerminalStdin(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	var log requestLog
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		log.add(r, body)
		okStream(w, "")
	})
	_, stderr, code := runApp(t, tty, "exec", "--socket", sock, "--", "python3")
	if code != cmdline.ExitUsage || !strings.Contains(stderr, "nsbox repl") {
		t.Errorf("python3 at a terminal: exit %d, stderr %q; want %d and a pointer to nsbox repl", code, stderr, cmdline.ExitUsage)
	}
	if n := len(log.list()); n != 0 {
		t.Errorf("%d runs sent, want none", n)
	}
	if _, stderr, code := runApp(t, tty, "exec", "--socket", sock, "--", "ls"); code != 0 {
		t.Errorf("ls at a terminal: exit %d:\n%s", code, stderr)
	}
	var req agentapi.RunRequest
	if l := log.list(); len(l) != 1 || json.Unmarshal(log.body[0], &req) != nil || req.Stdin != "" {
		t.Errorf("ls: requests %q, stdin %q", l, req.Stdin)
	}
}
