package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/rootfs"
)

// engineArgs is the cheapest bench there is: the engine part, two rounds,
// one short throughput round at concurrency 1.
var engineArgs = []string{"--only", "engine", "--runs", "2", "--rounds", "1", "--round", "100ms", "--concurrency", "1"}

// engineBench is the test binary as nsbox-bench with args on the store
// of the test rootfs "minimal", under a deadline that only a hang meets.
// Its PATH holds chroot alone (for the bare python3 row, which then finds
// python3 in the rootfs's /usr/bin): the peers are skipped as not
// installed, which keeps the run to seconds.
func engineBench(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the bench runs sandboxes in-process")
	}
	store := os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = rootfs.DefaultStoreRoot
	}
	if _, err := (rootfs.Store{Root: store}).Lookup("minimal"); err != nil {
		t.Skipf("the bench's engine part needs rootfs \"minimal\" in %s: %v", store, err)
	}
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Skipf("the bench's bare python3 row needs chroot: %v", err)
	}
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nPATH=/usr/bin:/bin exec " + chroot + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "chroot"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"--store", store, "--rootfs", "minimal"}, args...)...)
	cmd.Env = append(os.Environ(), benchEnv+"=1", "PATH="+bin)
	return cmd
}

// engineTable is what every engine report prints: the latency table's
// header and the nsbox rows.
var engineTable = []string{"SYSTEM  RUNS  P50 ms  P95 ms  P50 vs bwrap", "nsbox (cold)", "nsbox (spare init)", "SYSTEM  CONCURRENCY  RUNS/S"}

// Two benches started at once both run and both print their report
// (issue 36 saw one of two print nothing and exit 0): what each makes is
// its own (temp dirs, cgroups named nsbox-bench-<id>, bundles, ports).
func TestTwoBenchesAtOnce(t *testing.T) {
	var cmds []*exec.Cmd
	var outs, errs []*bytes.Buffer
	for range 2 {
		cmd := engineBench(t, engineArgs...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		cmds, outs, errs = append(cmds, cmd), append(outs, &out), append(errs, &stderr)
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		err := cmd.Wait()
		if err != nil {
			t.Errorf("bench %d: %v; stderr:\n%s", i, err, errs[i])
		}
		for _, want := range engineTable {
			if !strings.Contains(outs[i].String(), want) {
				t.Errorf("bench %d printed no %q; stdout:\n%s\nstderr:\n%s", i, want, outs[i], errs[i])
			}
		}
	}
}

// A bench that cannot write its report (here a full disk: stdout is
// /dev/full) says so on stderr and exits 1; it used to end with status 0
// and nothing printed, as the fmt calls' errors were dropped.
func TestReportNotWrittenIsAnError(t *testing.T) {
	cmd := engineBench(t, engineArgs...)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = full, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "nsbox bench: writing the report: ") ||
		!strings.Contains(stderr.String(), "no space left on device") {
		t.Errorf("the bench with stdout on /dev/full: %v; want exit status 1 and the write error; stderr:\n%s", err, stderr.String())
	}
}
