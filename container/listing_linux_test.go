package container

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/workspace"
)

// A listing of the workspace stops at workspace.MaxListed entries and says
// so: List and Changed on a live sandbox, and the files of its Result. One
// file fewer is a whole list.
func TestListingsSayWhenCut(t *testing.T) {
	e := newTestEngine(t)
	for _, n := range []int{workspace.MaxListed, workspace.MaxListed + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			code := fmt.Sprintf(`
import sys
for i in range(%d):
    open('f%%05d' %% i, 'w').close()
print('ready', flush=True)
sys.stdin.readline()
`, n)
			stdinR, stdinW := ioPipe(t)
			sb, err := startSpec(t, context.Background(), e, Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", code}, Stdin: stdinR,
				// The run ends when the test says; making 10,001 files took
				// over the default 60 s in the cgroup v2 VM under load.
				Limits: Limits{Timeout: 10 * time.Minute}})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { out, _, _, _ := sb.Output(); return strings.Contains(string(out), "ready") })
			want := n > workspace.MaxListed
			ws := sb.Workspace()
			list, cut, err := ws.List("")
			if err != nil || cut != want || len(list) != min(n, workspace.MaxListed) {
				t.Errorf("List: %d entries, truncated %v, %v; want truncated %v", len(list), cut, err, want)
			}
			changed, cut, err := ws.Changed(Snapshot{}, nil)
			if err != nil || cut != want || len(changed) != min(n, workspace.MaxListed) {
				t.Errorf("Changed: %d files, truncated %v, %v; want truncated %v", len(changed), cut, err, want)
			}
			stdinW.Write([]byte("go\n"))
			stdinW.Close()
			res, err := sb.Wait()
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, res)
			if res.FilesTruncated != want || len(res.Files) != min(n, workspace.MaxListed) {
				t.Errorf("Result: %d files, truncated %v; want truncated %v", len(res.Files), res.FilesTruncated, want)
			}
		})
	}
}
