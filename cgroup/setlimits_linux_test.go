package cgroup

import (
	"fmt"
	"testing"
)

// Limits change on a live cgroup, up and down (on v1 the memory and
// memory+swap limits must be written in the right order each way).
func TestSetLimits(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "setlimits", Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	memFile, memDir, pidsDir, pidsFile := "memory.max", c.hier[0].path, c.hier[0].path, "pids.max"
	if !m.v2 {
		memFile, memDir, pidsDir = "memory.limit_in_bytes", c.dir["memory"].path, c.dir["pids"].path
	}
	for _, mem := range []int64{256 << 20, 32 << 20} {
		if err := c.SetLimits(Limits{MemoryBytes: mem, Pids: 8}); err != nil {
			t.Fatalf("SetLimits(%d): %v", mem, err)
		}
		if got := readTrim(t, memDir, memFile); got != fmt.Sprint(mem) {
			t.Errorf("%s = %s, want %d", memFile, got, mem)
		}
		if !m.v2 && fileExists(pathDir(memDir), "memory.memsw.limit_in_bytes") {
			if got := readTrim(t, memDir, "memory.memsw.limit_in_bytes"); got != fmt.Sprint(mem) {
				t.Errorf("memsw = %s, want %d", got, mem)
			}
		}
		if got := readTrim(t, pidsDir, pidsFile); got != "8" {
			t.Errorf("pids.max = %s, want 8", got)
		}
	}
	if err := c.SetLimits(Limits{Pids: -1}); err == nil {
		t.Error("negative limit accepted")
	}
}
