package container

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// The verdict is what the sandbox did, not when the engine looked: a run
// that exits well before its deadline keeps its own verdict and output even
// when the engine is held up past the deadline (here its result is
// collected late, as when the daemon was SIGSTOPped), and a run still going
// at its deadline is a timeout.
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
		{"runs past its deadline", "import time; print('done', flush=True); time.sleep(60)", StatusTimeout},
	}
	const deadline = time.Second
	for _, k := range sandboxKinds(t, e) {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				spec := Spec{RootfsDir: rootfs, Argv: []string{"python3", "-c", tc.code}, Limits: Limits{Timeout: deadline}}
				sb, err := k.start(context.Background(), spec)
				if err != nil {
					t.Fatal(err)
				}
				// Late: the deadline passes before anyone collects the result.
				time.Sleep(deadline + 500*time.Millisecond)
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
