package container

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A sandbox's tmpfs mounts have inodes in proportion to their bytes: the
// default disk holds 70,000 empty files in /workspace and in /tmp (65,535
// before), a small disk's /tmp runs out of inodes too, and the bytes still
// run out as before.
func TestTmpfsInodesFollowTheirSize(t *testing.T) {
	e := newTestEngine(t)
	touch := `
import os, sys
n = 0
try:
    for i in range(%d):
        open('%s/f%%d' %% i, 'w').close()
        n += 1
except OSError as e:
    print(n, e.strerror)
    sys.exit(1)
print(n, 'made')
`
	fill := `
import sys
n = 0
try:
    for i in range(400):
        with open('/workspace/big%d' % i, 'wb') as f:
            f.write(b'x' * (1 << 20))
        n += 1
except OSError as e:
    print(n, e.strerror)
    sys.exit(1)
`
	cases := []struct {
		name string
		code string
		lim  Limits
		want Status
		out  string
	}{
		// 70,000 files: past the 65,535 inodes tmpfs gave before. Room to
		// make them where a file costs ~0.3 ms (the emulated v2 VM).
		{"70k files in /workspace", fmt.Sprintf(touch, 70000, "/workspace"), Limits{Timeout: 3 * time.Minute}, StatusOK, "70000 made"},
		{"70k files in /tmp", fmt.Sprintf(touch, 70000, "/tmp"), Limits{Timeout: 3 * time.Minute}, StatusOK, "70000 made"},
		{"a small disk's /tmp runs out of inodes", fmt.Sprintf(touch, 20000, "/tmp"), Limits{DiskBytes: 8 << 20}, StatusExitNonzero, "No space left on device"},
		{"the bytes run out", fill, Limits{}, StatusExitNonzero, "No space left on device"},
	}
	for _, k := range sandboxKinds(t, e) {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				res := runKind(t, k, tc.code, tc.lim)
				if res.Status != tc.want || !strings.Contains(string(res.Stdout), tc.out) {
					t.Errorf("status %s, stdout %q, stderr %q; want %s and %q", res.Status, res.Stdout, res.Stderr, tc.want, tc.out)
				}
			})
		}
	}
}
