package mcp

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestDataStack checks what the descriptions say of a rootfs's modules:
// its zygote's, else its warm pool's, else nothing known.
func TestDataStack(t *testing.T) {
	pool := agentapi.PoolInfo{Rootfs: "r", Preimport: []string{"numpy", "pandas"}, Skipped: []string{"pandas"}, Ready: 1}
	tests := []struct {
		name  string
		info  agentapi.Info
		want  string // the modules, comma-separated
		known bool
	}{
		{"zygote ready", agentapi.Info{Zygotes: []agentapi.ZygoteInfo{{Rootfs: "r", State: "ready", Modules: []string{"numpy", "matplotlib.pyplot", "matplotlib"}}}}, "numpy,matplotlib", true},
		{"zygote unused", agentapi.Info{Zygotes: []agentapi.ZygoteInfo{{Rootfs: "r", State: "unused", Modules: []string{"numpy"}}}}, "", true},
		{"zygote starting, pool ready", agentapi.Info{Zygotes: []agentapi.ZygoteInfo{{Rootfs: "r", State: "starting"}}, Pools: []agentapi.PoolInfo{pool}}, "numpy", true},
		{"another rootfs's zygote", agentapi.Info{Zygotes: []agentapi.ZygoteInfo{{Rootfs: "other", State: "ready", Modules: []string{"numpy"}}}}, "", false},
		{"pool not started", agentapi.Info{Pools: []agentapi.PoolInfo{{Rootfs: "r", Preimport: []string{"numpy"}}}}, "", false},
		{"nothing", agentapi.Info{}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, known := dataStack(&tc.info, "r")
			if strings.Join(got, ",") != tc.want || known != tc.known {
				t.Errorf("dataStack = %v, %v; want %q, %v", got, known, tc.want, tc.known)
			}
		})
	}
}

func TestSizeText(t *testing.T) {
	for n, want := range map[int64]string{128 << 10: "128 KiB", 1 << 30: "1 GiB", 1536 << 20: "1536 MiB", 1000: "1000 bytes"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}
