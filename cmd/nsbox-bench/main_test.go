package main

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
)

// The test binary is also the bench (benchEnv set: main) and the fake
// nsbox it starts as its private daemon (`daemon ...`).
const (
	benchEnv = "NSBOX_BENCH_TEST_MAIN"
	readyEnv = "NSBOX_BENCH_TEST_READY" // the file the fake daemon writes its cgroup name to once the bench talks to it
)

func TestMain(m *testing.M) {
	// The engine part's sandboxes have this test binary as their init.
	container.MaybeInit()
	switch {
	case len(os.Args) > 1 && os.Args[1] == "daemon":
		fakeDaemon(os.Args[2:])
	case os.Getenv(benchEnv) != "":
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cgroupDirs are this process's own cgroup in each hierarchy.
func cgroupDirs() []string {
	l, err := cgroup.LocateSelf()
	if err != nil {
		return nil
	}
	dirs := []string{}
	if l.Unified != "" {
		dirs = append(dirs, l.Unified)
	}
	for _, d := range l.V1 {
		dirs = append(dirs, d)
	}
	return dirs
}

// fakeDaemon answers /v1/health, holds /v1/info (the bench waits there),
// makes cgroups under its --cgroup-name in every hierarchy, and at SIGTERM
// removes all but an empty zy-1 in each (a daemon's teardown cut short)
// and exits 0.
func fakeDaemon(args []string) {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	sock, name := fs.String("socket", "", ""), fs.String("cgroup-name", "", "")
	for _, f := range []string{"config", "state-dir", "run-dir", "rootfs-store", "default-rootfs", "queue", "log-level", "pool-node-size"} {
		fs.String(f, "", "")
	}
	if fs.Parse(args) != nil || *sock == "" || *name == "" {
		os.Exit(2)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for _, d := range cgroupDirs() {
		for _, sub := range []string{"pool-1", "zy-1"} {
			if os.MkdirAll(filepath.Join(d, *name, sub), 0o755) != nil {
				os.Exit(3)
			}
		}
	}
	ln, err := net.Listen("unix", *sock)
	if err != nil {
		os.Exit(4)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("GET /v1/info", func(_ http.ResponseWriter, r *http.Request) {
		_ = os.WriteFile(os.Getenv(readyEnv), []byte(*name), 0o644)
		<-r.Context().Done()
	})
	go http.Serve(ln, mux)
	<-term
	for _, d := range cgroupDirs() {
		os.Remove(filepath.Join(d, *name, "pool-1"))
	}
	os.Exit(0)
}

// An interrupted bench (SIGTERM, as timeout(1) sends) stops its private
// daemon with SIGTERM and removes the cgroups the daemon left behind, in
// every hierarchy, then exits with the signal's status.
func TestSIGTERMLeavesNoCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the bench and its daemon make cgroups")
	}
	store := os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = rootfs.DefaultStoreRoot
	}
	for _, name := range []string{"minimal", "default"} {
		if _, err := (rootfs.Store{Root: store}).Lookup(name); err != nil {
			t.Skipf("the bench's state part needs rootfs %q in %s: %v", name, store, err)
		}
	}
	ready := filepath.Join(t.TempDir(), "ready")
	bench := exec.Command(os.Args[0], "--only", "state", "--store", store, "--nsbox", os.Args[0])
	bench.Env = append(os.Environ(), benchEnv+"=1", readyEnv+"="+ready)
	var stderr bytes.Buffer
	bench.Stderr = &stderr
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bench.Process.Kill() })
	var name []byte
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if name, err = os.ReadFile(ready); err == nil && len(name) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bench never reached its daemon: %s", stderr.String())
		}
	}
	if !strings.HasPrefix(string(name), "nsbox-bench-") {
		t.Fatalf("the daemon's cgroup name %q", name)
	}
	if err := bench.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := bench.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("the bench at SIGTERM: %v, want exit status 143; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping the private daemons") {
		t.Errorf("stderr does not say what it does: %s", stderr.String())
	}
	for _, d := range cgroupDirs() {
		p := filepath.Join(d, string(name))
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it removed", p, err)
			_ = os.Remove(filepath.Join(p, "zy-1"))
			_ = os.Remove(filepath.Join(p, "pool-1"))
			_ = os.Remove(p)
		}
	}
}
