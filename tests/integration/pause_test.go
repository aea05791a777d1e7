package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// TestSessionPauseResume drives pause and resume through the API: state and
// paused_at, a pause refused while an exec runs (409), an exec that thaws
// a paused session and finds its state, idle_action "pause", and the
// refusals of bad input.
func TestSessionPauseResume(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, id, "x = 41")
	s, err := d.client.PauseSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != agentapi.SessionPaused || s.PausedAt == nil {
		t.Fatalf("after pause: %+v", s)
	}
	if got, err := d.client.Session(ctx, id); err != nil || got.State != agentapi.SessionPaused {
		t.Fatalf("GET a paused session: %+v %v", got, err)
	}
	if m := metricsText(t, d); !strings.Contains(m, "nsbox_sessions_paused 1\n") {
		t.Errorf("/metrics does not count the paused session:\n%s", m)
	}
	if s, err = d.client.ResumeSession(ctx, id); err != nil || s.State != agentapi.SessionIdle || s.PausedAt != nil {
		t.Fatalf("after resume: %+v %v", s, err)
	}
	if _, err := d.client.PauseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if res := execOK(t, d, id, "x + 1"); res.Value != "42" {
		t.Fatalf("exec on a paused session: %q", res.Value)
	}

	done := make(chan error, 1)
	go func() {
		// Busy until the test has tried the pause: it opens the gate after.
		_, err := d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "import os, time\nwhile not os.path.exists('/workspace/gate'): time.sleep(0.01)"})
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		s, err := d.client.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == agentapi.SessionBusy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec never showed as busy")
		}
	}
	var ae *agentapi.Error
	if _, err := d.client.PauseSession(ctx, id); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Errorf("pause during an exec: %v, want 409", err)
	}
	if err := d.client.PutFile(ctx, id, "gate", strings.NewReader("")); err != nil {
		t.Fatalf("open the gate: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.PauseSession(ctx, "0000000000000000"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("pause of no session: %v, want 404", err)
	}

	idle := newSession(t, d, &agentapi.SessionRequest{IdleTimeoutMs: 300, IdleAction: "pause"})
	execOK(t, d, idle, "y = 7")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err := d.client.Session(ctx, idle)
		if err != nil {
			t.Fatalf("the idle session is gone: %v", err)
		}
		if s.State == agentapi.SessionPaused {
			if s.IdleAction != "pause" {
				t.Errorf("idle_action %q", s.IdleAction)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not paused 30 s after a 300 ms idle timeout: %+v", s)
		}
	}
	if res := execOK(t, d, idle, "y"); res.Value != "7" {
		t.Fatalf("y = %q after the idle pause", res.Value)
	}
	_, err = d.client.CreateSession(ctx, &agentapi.SessionRequest{IdleAction: "sleep"})
	wantFieldError(t, err, "idle_action")
	for _, sid := range []string{id, idle} {
		if err := d.client.DeleteSession(ctx, sid); err != nil {
			t.Fatal(err)
		}
	}
	d.assertClean(t)
}

// metricsText is the daemon's /metrics page.
func metricsText(t *testing.T, d *daemon) string {
	t.Helper()
	resp, err := d.http.Get("http://nsbox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestPausedSessionOfKilledDaemon: a paused session's sandbox is frozen,
// its processes with it. When its daemon is SIGKILLed, the next daemon on
// the same run dir takes the sandbox back at its start, as it does every
// sandbox of a dead daemon: its liveness lock was the dead daemon's alone,
// so Recover kills what is in it (thawed for the kill) and removes it. The
// session itself is gone, as a live one is at any restart (a session to
// keep across a crash is parked).
func TestPausedSessionOfKilledDaemon(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	marker := randomName("nsbox-paused-")
	var ids []string
	for range 2 {
		id := newSession(t, d, &agentapi.SessionRequest{})
		// The marker is in the environment of a process that forks
		// nothing: Popen returns once it has exec'd, so each session has
		// exactly one (a shell's fork for sleep, frozen between fork and
		// exec under load, showed the marker twice).
		execOK(t, d, id, fmt.Sprintf("import os, subprocess\np = subprocess.Popen(['sleep', '3600'], env=dict(os.environ, NSBOX_MARK=%q))", marker))
		if s, err := d.client.PauseSession(ctx, id); err != nil || s.State != agentapi.SessionPaused {
			t.Fatalf("pause: %+v %v", s, err)
		}
		ids = append(ids, id)
	}
	if c := d.leftoverCgroups(t); len(c) == 0 {
		t.Fatal("the paused sessions have no sandbox cgroups")
	}
	if p := processesWith(marker); len(p) != 2 {
		t.Fatalf("the paused sessions' processes: %v, want 2", p)
	}
	_ = d.signal(t, syscall.SIGKILL)
	d.start(t) // Recover runs before the socket answers
	if c := d.leftoverCgroups(t); len(c) > 0 {
		t.Errorf("the paused sessions' sandboxes outlive the next daemon's start: %q\n%s", c, d.log.String())
	}
	waitGone(t, marker)
	for _, id := range ids {
		if !strings.Contains(d.log.String(), `msg="removed leftover sandbox" component=engine id=`+id) {
			t.Errorf("no log of session %s's sandbox taken back", id)
		}
		_, err := d.client.Session(ctx, id)
		wantStatus(t, err, http.StatusNotFound, "no such session")
	}
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	d.assertClean(t, ids...)
}
