package container

import (
	"fmt"
	"strings"
	"testing"
)

// A sandbox's tmpfs mounts have inodes in proportion to their bytes: the
// default disk holds 100,000 empty files in /workspace and in /tmp, a small
// disk's /tmp runs out of inodes too, and the bytes still run out as before.
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
		{"100k files in /workspace", fmt.Sprintf(touch, 100000, "/workspace"), Limits{}, StatusOK, "100000 made"},
		{"100k files in /tmp", fmt.Sprintf(touch, 100000, "/tmp"), Limits{}, StatusOK, "100000 made"},
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
