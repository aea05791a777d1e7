package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// wantCode fails unless err is an API error with status and code.
func wantCode(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Errorf("%s: %v, want %d %q", what, err, status, code)
	}
}

// TestSessionConflictCodes: the 409s of a session say what happened, so a
// client drops a dead session and not a busy one. A session running an
// exec refuses pause, fork and park with session_busy and stays usable; a
// dead one answers session_dead; a parked one's file routes answer
// session_parked.
func TestSessionConflictCodes(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{})

	// The cell says "ready" and runs until the test writes /workspace/go
	// (file operations do not wait for the exec).
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		code := "import os, time\nprint('ready', flush=True)\nwhile not os.path.exists('/workspace/go'):\n    time.sleep(0.01)"
		once := false
		res, err := d.client.ExecStream(ctx, id, &agentapi.ExecRequest{Code: code}, func(ev agentapi.Event) {
			if ev.Type == agentapi.EventStdout && strings.Contains(ev.Data, "ready") && !once {
				once = true
				close(ready)
			}
		})
		if err == nil && res.Status != agentapi.StatusOK {
			err = errors.New("the busy cell ended " + res.Status + ": " + res.Error)
		}
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the cell ended before it was ready: %v", err)
	}
	_, err := d.client.PauseSession(ctx, id)
	wantCode(t, "pause of a busy session", err, http.StatusConflict, agentapi.CodeSessionBusy)
	if !errors.Is(err, errdefs.ErrSessionBusy) || errors.Is(err, errdefs.ErrSessionDead) {
		t.Errorf("the client's error %v is not errdefs.ErrSessionBusy alone", err)
	}
	_, err = d.client.ForkSession(ctx, id, 1)
	wantCode(t, "fork of a busy session", err, http.StatusConflict, agentapi.CodeSessionBusy)
	_, err = d.client.ParkSession(ctx, id)
	wantCode(t, "park of a busy session", err, http.StatusConflict, agentapi.CodeSessionBusy)
	if err := d.client.PutFile(ctx, id, "go", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Busy was not dead: the session runs the next exec.
	execOK(t, d, id, "1")

	if res, err := d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "import os; os._exit(3)"}); err != nil || !res.SessionDead {
		t.Fatalf("killing the session: %+v %v", res, err)
	}
	_, err = d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "1"})
	wantCode(t, "exec on a dead session", err, http.StatusConflict, agentapi.CodeSessionDead)
	if !errors.Is(err, errdefs.ErrSessionDead) {
		t.Errorf("the client's error %v is not errdefs.ErrSessionDead", err)
	}
	_, err = d.client.ParkSession(ctx, id)
	wantCode(t, "park of a dead session", err, http.StatusConflict, agentapi.CodeSessionDead)

	parked := newSession(t, d, &agentapi.SessionRequest{})
	park(t, d, parked)
	_, err = d.client.GetFile(ctx, parked, "x")
	wantCode(t, "a file of a parked session", err, http.StatusConflict, agentapi.CodeSessionParked)
	_, err = d.client.PauseSession(ctx, parked)
	wantCode(t, "pause of a parked session", err, http.StatusConflict, agentapi.CodeSessionParked)
}
