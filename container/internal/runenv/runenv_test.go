package runenv

import (
	"slices"
	"testing"
)

func TestBuild(t *testing.T) {
	tests := []struct {
		name    string
		extra   []string
		threads int
		memory  int64
		want    []string // pairs that must be there
		absent  []string
	}{
		{"threads and heap follow the limits", nil, 2, 512 << 20,
			[]string{"OPENBLAS_NUM_THREADS=2", "OMP_NUM_THREADS=2", "NODE_OPTIONS=--max-old-space-size=512"}, nil},
		{"heap of a limit below 1 MiB", nil, 1, 4096,
			[]string{"NODE_OPTIONS=--max-old-space-size=1"}, nil},
		{"the caller's NODE_OPTIONS replaces the base's", []string{"NODE_OPTIONS=--stack-size=500"}, 1, 1 << 30,
			[]string{"NODE_OPTIONS=--stack-size=500"}, []string{"NODE_OPTIONS=--max-old-space-size=1024"}},
		{"extra on top", []string{"HOME=/tmp", "GREETING=hi"}, 1, 1 << 30,
			[]string{"HOME=/tmp", "GREETING=hi", "PATH=" + BasePath}, []string{"HOME=/workspace"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := Build(tc.extra, tc.threads, tc.memory)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.Contains(env, w) {
					t.Errorf("%s missing from %q", w, env)
				}
			}
			for _, a := range tc.absent {
				if slices.Contains(env, a) {
					t.Errorf("%s in %q", a, env)
				}
			}
		})
	}
	for _, bad := range [][]string{{"BAD KEY=1"}, {"NOEQUALS"}, {"K=a\x00b"}} {
		if _, err := Build(bad, 1, 1<<30); err == nil {
			t.Errorf("Build(%q) accepted", bad)
		}
	}
}
