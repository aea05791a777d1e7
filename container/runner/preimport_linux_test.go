package runner

import (
	"context"
	"slices"
	"testing"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

func TestPreimport(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	skipped, err := r.Preimport(context.Background(), []string{"json", "nsbox_no_such_module", "csv"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(skipped, []string{"nsbox_no_such_module"}) {
		t.Errorf("skipped %q, want only the missing module", skipped)
	}
	tests := []struct{ name, code, value string }{
		{"imported", "import sys; 'json' in sys.modules and 'csv' in sys.modules", "True"},
		{"no names bound", "'json' in globals() or 'csv' in globals()", "False"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := exec(t, r, tc.code)
			if res.Status != StatusOK || res.Value != tc.value {
				t.Fatalf("status %s value %q exception %+v, want ok %q", res.Status, res.Value, res.Exception, tc.value)
			}
			if res.Count != i+1 {
				t.Errorf("execution count %d, want %d: the preimport must not count", res.Count, i+1)
			}
		})
	}
}
