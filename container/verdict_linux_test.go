package container

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// The verdict is what the sandbox did, not when the engine looked: a run
// that exited before its deadline timer fired keeps its own verdict and
// output even when the timer fires late (the daemon was SIGSTOPped or
// starved: here the test fires it itself once the kernel says the run has
// exited, and the engine's done channel may not have been read), and a run
// still going when its timer fires is a timeout. The runs' real deadline
// is an hour, so how fast the machine starts python3 does not matter.
func TestLateCollectionKeepsTheVerdict(t *testing.T) {
	e := newTestEngine(t)
	rootfs := testenv.Rootfs(t)
	cases := []struct {
		name string
		code string
		want Status
	}{
		{"exits 0 in time", "print('done')", StatusOK},
		{"exits 3 in time", "import sys; print('done'); sys.exit(3)", StatusExitNonzero},
		{"runs past its deadline", "import time; print('done', flush=True); time.sleep(3600)", StatusTimeout},
	}
	for _, k := range sandboxKinds(t, e) {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				printed := newLineWatch("done")
				spec := Spec{RootfsDir: rootfs, Argv: []string{"python3", "-c", tc.code}, Limits: Limits{Timeout: time.Hour}, Stdout: printed}
				sb, err := k.start(context.Background(), spec)
				if err != nil {
					t.Fatal(err)
				}
				if tc.want == StatusTimeout {
					<-printed.seen // still running, having printed
				} else {
					for !sb.proc.hasExited() {
						time.Sleep(10 * time.Millisecond)
					}
				}
				sb.deadlinePassed() // the timer, late
				res, err := sb.Wait()
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != tc.want || strings.TrimSpace(string(res.Stdout)) != "done" {
					t.Errorf("status %s (exit %d), stdout %q, want %s with its output", res.Status, res.ExitCode, res.Stdout, tc.want)
				}
			})
		}
	}
}
