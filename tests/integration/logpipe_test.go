package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// A daemon whose log pipe closes (`nsbox daemon 2>&1 | head`, a log
// shipper restarting) keeps serving: Go's default would kill it with
// SIGPIPE at its next log line, leaving its sandboxes to the next start.
func TestDaemonSurvivesAClosedLogPipe(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nsbox.sock")
	args := daemonArgs(t, sock)
	cmd := exec.Command(nsboxBin, args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		testdaemon.RemoveCgroups(t, cgroupNameOf(args), "")
	})
	cl := &client.Client{Socket: sock}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := cl.Health(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon never answered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.Close() // the reader goes away: every log line from now on hits a broken pipe
	for i := range 3 {
		res, err := cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(6 * 7)"})
		if err != nil || res.Stdout != "42\n" {
			t.Fatalf("run %d after the log pipe closed: %+v %v", i, res, err)
		}
	}
	if _, err := cl.Health(ctx); err != nil {
		t.Fatalf("health after the log pipe closed: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Errorf("daemon exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not stop on SIGTERM")
	}
	exited <- nil // for the cleanup
}

// cgroupNameOf is the --cgroup-name in daemon args.
func cgroupNameOf(args []string) string {
	for i, a := range args {
		if a == "--cgroup-name" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
