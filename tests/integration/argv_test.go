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

// TestArgvTheKernelRefuses: an argv whose argv[0] the kernel will not
// execute in the sandbox (a data file, a directory, a missing path, a
// script without #!, a path through a file) is the caller's mistake: 400
// invalid_argument naming argv and the errno, plain and streamed, counted
// as invalid and not in nsbox_spawn_failures_total, and no sandbox left
// behind. A bare name missing from PATH is still a run that exits 127,
// as in a shell.
func TestArgvTheKernelRefuses(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	spawnBefore := d.metric(t, "nsbox_spawn_failures_total")
	if spawnBefore == "" {
		t.Fatal("no nsbox_spawn_failures_total in /metrics")
	}
	script := []agentapi.File{{Path: "x.sh", Text: "echo hi\n", Mode: 0o755}}
	cases := []struct {
		name  string
		argv  []string
		files []agentapi.File
		want  string
	}{
		{"a data file", []string{"/etc/passwd"}, nil, "argv: /etc/passwd: permission denied: not executable"},
		{"a directory", []string{"/tmp"}, nil, "argv: /tmp: permission denied: not executable"},
		{"a missing relative path", []string{"./x"}, nil, "argv: ./x: no such file or directory: no such file in the sandbox"},
		{"a path through a file", []string{"/etc/passwd/x"}, nil, "argv: /etc/passwd/x: not a directory"},
		{"a script without #!", []string{"./x.sh"}, script, "argv: ./x.sh: exec format error: not a program the kernel can run"},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/streamed"
			}
			t.Run(name, func(t *testing.T) {
				req := &agentapi.RunRequest{Argv: tc.argv, Files: tc.files}
				var err error
				if stream {
					_, err = d.client.RunStream(ctx, req, func(agentapi.Event) {})
				} else {
					_, err = d.client.Run(ctx, req)
				}
				// A streamed run's refusal is an error event after its
				// start event: the code and message, no status.
				var ae *agentapi.Error
				if !errors.As(err, &ae) || ae.Code != agentapi.CodeInvalidArgument || (!stream && ae.Status != http.StatusBadRequest) {
					t.Fatalf("got %v, want 400 %s", err, agentapi.CodeInvalidArgument)
				}
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Errorf("%v is not errdefs.ErrInvalidArgument", err)
				}
				if !strings.Contains(ae.Message, tc.want) || !strings.Contains(ae.Message, "give a program in the rootfs") {
					t.Errorf("message %q: want %q and what to do", ae.Message, tc.want)
				}
			})
		}
	}
	res, err := d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"no-such-command-xyz"}})
	if err != nil || res.ExitCode != 127 || !strings.Contains(res.Stderr, "command not found") {
		t.Errorf("a name missing from PATH: %+v %v, want exit 127 and command not found", res, err)
	}
	if got := d.metric(t, "nsbox_spawn_failures_total"); got != spawnBefore {
		t.Errorf("nsbox_spawn_failures_total went from %s to %s on the caller's mistakes", spawnBefore, got)
	}
	if got, want := d.metricSum(t, `nsbox_runs_total{status="invalid"}`), "10"; got != want {
		t.Errorf(`nsbox_runs_total{status="invalid"} = %q, want %s`, got, want)
	}
	d.waitIdle(t)
	if c := d.leftoverCgroups(t); len(c) > 0 {
		t.Errorf("refused commands left sandboxes: %q", c)
	}
}
