package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// carry snapshots from and restores st into to, and returns what the
// snapshot and the restore left behind.
func carry(t *testing.T, from, to *Runner) []NotCarried {
	t.Helper()
	ctx := context.Background()
	st, err := from.Snapshot(ctx, 0, time.Minute)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer st.Close()
	failed, err := to.Restore(ctx, st, time.Minute)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return append(st.NotCarried, failed...)
}

// cells runs each code in r, failing t on any that does not run.
func cells(t *testing.T, r *Runner, codes ...string) {
	t.Helper()
	for _, code := range codes {
		if res := exec(t, r, code); res.Status != StatusOK {
			t.Fatalf("%q: %s %+v", code, res.Status, res.Exception)
		}
	}
}

func notCarried(nc []NotCarried, name string) (NotCarried, bool) {
	for _, n := range nc {
		if n.Name == name {
			return n, true
		}
	}
	return NotCarried{}, false
}

// TestStateStdlibPickle carries data with the stdlib's pickle (the
// minimal rootfs has no cloudpickle): values, a stdlib class's instance,
// modules by name, contexts and counts; what cannot go is listed.
func TestStateStdlibPickle(t *testing.T) {
	e := newEngine(t)
	dir := testenv.Rootfs(t)
	a, b := startRunner(t, e, dir), startRunner(t, e, dir)
	cells(t, a,
		"import json, random, fractions as fr",
		"d = {'k': [1, 2, 3], 's': 'x'}; q = fr.Fraction(1, 3)",
		"f = open('/workspace/x', 'w'); g = (i for i in range(3))",
		"import threading; th = threading.Thread(target=lambda: None)",
		"class C: pass",
		"c = C(); fn = lambda: 1",
	)
	if res := execReq(t, a, ExecRequest{Code: "y = 'ctx'", Context: "other", Timeout: time.Minute}); res.Status != StatusOK {
		t.Fatalf("context cell: %+v", res)
	}
	nc := carry(t, a, b)
	for _, name := range []string{"f", "g", "th", "C", "c", "fn"} {
		if n, ok := notCarried(nc, name); !ok || n.Reason == "" {
			t.Errorf("%s is not listed as not carried (%+v)", name, nc)
		}
	}
	if n, _ := notCarried(nc, "C"); !strings.Contains(n.Reason, "cloudpickle") {
		t.Errorf("the reason for a cell's class does not name cloudpickle: %q", n.Reason)
	}
	for _, name := range []string{"d", "q", "json", "random"} {
		if n, ok := notCarried(nc, name); ok {
			t.Errorf("%s not carried: %s", name, n.Reason)
		}
	}
	if len(nc) != 6 {
		t.Errorf("not carried: %+v, want only the 6 names above (nothing of the runner's bootstrap)", nc)
	}
	res := exec(t, b, "(d['k'], q * 3, json.dumps(1), type(random).__name__)")
	if res.Value != "([1, 2, 3], Fraction(1, 1), '1', 'module')" {
		t.Fatalf("restored values: %s %+v", res.Value, res.Exception)
	}
	if res.Count != 7 {
		t.Errorf("execution count after restore: %d, want 7 (6 cells carried, then this one)", res.Count)
	}
	if res := execReq(t, b, ExecRequest{Code: "y", Context: "other", Timeout: time.Minute}); res.Value != "'ctx'" || res.Count != 2 {
		t.Fatalf("named context after restore: %q count %d %+v", res.Value, res.Count, res.Exception)
	}
}

// TestStateCloudpickle carries what cells define (functions, lambdas,
// classes and their instances) when the rootfs has cloudpickle, and binds
// a carried function to its new namespace.
func TestStateCloudpickle(t *testing.T) {
	dir := testenv.DataSciRootfs(t)
	if _, err := os.Stat(filepath.Join(dir, "usr/lib/python3/dist-packages/cloudpickle")); err != nil {
		t.Skipf("the data-science rootfs at %s has no cloudpickle (rebuild it: the datasci profile has python3-cloudpickle): %v", dir, err)
	}
	e := newEngine(t)
	a, b := startRunner(t, e, dir), startRunner(t, e, dir)
	cells(t, a,
		"k = 10\ndef add(x): return x + k",
		"sq = lambda v: v * v",
		"class P:\n  def __init__(s, n): s.n = n\n  def twice(s): return s.n * 2",
		"p = P(21)",
		"import matplotlib.pyplot as plt; fig = plt.figure()",
		"import numpy as np, pandas as pd\ndf = pd.DataFrame(np.arange(100000.0).reshape(-1, 4))\nodd = np.arange(10)[::2]",
	)
	nc := carry(t, a, b)
	if _, ok := notCarried(nc, "fig"); !ok {
		t.Errorf("a live figure is not listed: %+v", nc)
	}
	for _, name := range []string{"add", "sq", "P", "p", "k", "plt"} {
		if n, ok := notCarried(nc, name); ok {
			t.Errorf("%s not carried: %s", name, n.Reason)
		}
	}
	if res := exec(t, b, "(add(1), sq(3), p.twice(), isinstance(p, P))"); res.Value != "(11, 9, 42, True)" {
		t.Fatalf("restored functions: %s %+v", res.Value, res.Exception)
	}
	// Arrays come out of band (pickle protocol 5) and are writable.
	if res := exec(t, b, "df.iloc[0, 0] = 5.0; (float(df.values.sum()), odd.tolist(), df.values.flags.writeable)"); res.Value != "(4999950005.0, [0, 2, 4, 6, 8], True)" {
		t.Fatalf("restored arrays: %s %+v", res.Value, res.Exception)
	}
	if res := exec(t, b, "k = 100; add(1)"); res.Value != "101" {
		t.Fatalf("a carried function does not see its namespace: %s %+v", res.Value, res.Exception)
	}
}

// TestStateSharedObjects: names bound to one object are still bound to
// one object after a restore (b = a, a dict holding a, across contexts
// too), and a name whose pickling fails halfway through does not break a
// later name that holds part of it.
func TestStateSharedObjects(t *testing.T) {
	e := newEngine(t)
	dir := testenv.Rootfs(t)
	a, b := startRunner(t, e, dir), startRunner(t, e, dir)
	cells(t, a,
		"import threading",
		"a = [1]; b = a; d = {'x': a}",
		"c = [[8], threading.Lock()]; e = c[0]",
	)
	nc := carry(t, a, b)
	if _, ok := notCarried(nc, "c"); !ok || len(nc) != 1 {
		t.Errorf("not carried %+v, want only c (it holds a lock)", nc)
	}
	// In order: the append must come before d['x'] shows it.
	for _, c := range []struct{ code, want string }{
		{"a is b and d['x'] is a", "True"},
		{"e", "[8]"},
		{"b.append(2); a", "[1, 2]"},
		{"d['x']", "[1, 2]"},
	} {
		if res := exec(t, b, c.code); res.Status != StatusOK || res.Value != c.want {
			t.Errorf("%q in the restored runner: %s %q %+v, want %q", c.code, res.Status, res.Value, res.Exception, c.want)
		}
	}
}

// TestStateRandomReseeded: two restores of one state draw different
// numbers from random.
func TestStateRandomReseeded(t *testing.T) {
	e := newEngine(t)
	dir := testenv.Rootfs(t)
	a, b, c := startRunner(t, e, dir), startRunner(t, e, dir), startRunner(t, e, dir)
	exec(t, a, "import random; random.seed(1)")
	ctx := context.Background()
	st, err := a.Snapshot(ctx, 0, time.Minute)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer st.Close()
	for _, r := range []*Runner{b, c} {
		if _, err := r.Restore(ctx, st, time.Minute); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	}
	x, y := exec(t, b, "random.random()").Value, exec(t, c, "random.random()").Value
	if x == "" || x == y {
		t.Fatalf("two restores drew the same number: %q %q", x, y)
	}
}

// TestStateCap: a state over its cap is an error; the runner lives on.
func TestStateCap(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	exec(t, r, "big = b'x' * (2 << 20)")
	_, err := r.Snapshot(context.Background(), 1<<20, time.Minute)
	if !errors.Is(err, ErrStateTooLarge) || !strings.Contains(err.Error(), "over 1048576 bytes") {
		t.Fatalf("Snapshot over its cap: %v", err)
	}
	if res := exec(t, r, "len(big)"); res.Value != "2097152" {
		t.Fatalf("the runner after a refused snapshot: %+v", res)
	}
}

// TestStateInterrupted: a snapshot whose pickling runs past its timeout
// (a __reduce__ that loops) is interrupted; the runner lives on.
func TestStateInterrupted(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	exec(t, r, "import time\nclass Slow:\n  def __reduce__(self):\n    time.sleep(60)\ns = Slow()")
	_, err := r.Snapshot(context.Background(), 0, 200*time.Millisecond)
	if !errors.Is(err, ErrState) {
		t.Fatalf("Snapshot past its timeout: %v", err)
	}
	if res := exec(t, r, "1 + 1"); res.Value != "2" {
		t.Fatalf("the runner after an interrupted snapshot: %+v", res)
	}
}

// TestStateNode: a Node runner's state cannot be carried: Snapshot
// refuses it, and runner.js answers the request itself with the reason.
func TestStateNode(t *testing.T) {
	r := startNode(t)
	ctx := context.Background()
	if _, err := r.Snapshot(ctx, 0, time.Minute); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "Python sessions") {
		t.Fatalf("Snapshot of a Node runner: %v", err)
	}
	f, err := newMemfd()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := r.controlFor(ctx, stateRequest{Snapshot: true}, []*os.File{f}, time.Minute)
	if err != nil || !strings.Contains(rep.Error, "fork and park are for Python sessions") {
		t.Fatalf("runner.js on a snapshot request: %+v %v", rep, err)
	}
	if res := exec(t, r, "1 + 1"); res.Value != "2" {
		t.Fatalf("the Node runner after the request: %+v", res)
	}
}

// TestStateSealed: once taken, a state cannot be changed by anyone who
// holds its fd (a branch it is restored into, the parent that wrote it):
// the memfd is sealed against writes, growth and shrinking.
func TestStateSealed(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	exec(t, r, "x = 1")
	st, err := r.Snapshot(context.Background(), 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.f.WriteAt([]byte("evil"), 0); err == nil {
		t.Fatal("wrote into a sealed state")
	}
	if err := st.f.Truncate(0); err == nil {
		t.Fatal("truncated a sealed state")
	}
	if seals, err := unix.FcntlInt(st.f.Fd(), unix.F_GET_SEALS, 0); err != nil || seals&unix.F_SEAL_WRITE == 0 || seals&unix.F_SEAL_SEAL == 0 {
		t.Fatalf("seals %#x %v", seals, err)
	}
}
