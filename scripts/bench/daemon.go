package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/scripts/bench/interrupt"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// daemon is the daemon the bench talks to: a private one it started,
// or one at --socket.
type daemon struct {
	client   *client.Client
	cmd      *exec.Cmd
	dir      string
	log      *os.File
	stopOnce sync.Once
}

// startDaemon starts `nsbox daemon` (the binary nsbox) on temp paths with
// its own cgroup name, the config file conf and extra flags.
func startDaemon(nsbox, store, rfs, conf string, extra ...string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "nsbox-bench-daemon-")
	if err != nil {
		return nil, err
	}
	d := &daemon{dir: dir, client: &client.Client{Socket: filepath.Join(dir, "s.sock")}}
	if err := os.WriteFile(filepath.Join(dir, "nsbox.conf"), []byte(conf), 0o600); err != nil {
		d.close()
		return nil, err
	}
	if d.log, err = os.Create(filepath.Join(dir, "daemon.log")); err != nil {
		d.close()
		return nil, err
	}
	d.cmd = exec.Command(nsbox, "daemon", "--config", filepath.Join(dir, "nsbox.conf"), "--socket", d.client.Socket,
		"--state-dir", filepath.Join(dir, "state"), "--run-dir", filepath.Join(dir, "run"), "--rootfs-store", store,
		"--default-rootfs", rfs, "--queue", "64", "--cgroup-name", interrupt.Name(), "--log-level", "warn")
	d.cmd.Args = append(d.cmd.Args, extra...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		d.close()
		return nil, err
	}
	if err := interrupt.Track(d); err != nil {
		d.close()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.Health(ctx)
		cancel()
		if err == nil {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.close()
			return nil, fmt.Errorf("the bench daemon did not answer: %v (log in %s)", err, d.log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) close() {
	d.Stop(interrupt.Grace)
	if d.log != nil {
		d.log.Close()
	}
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

// poolSettle is the pause after the pools are full before a warm sample.
const poolSettle = 250 * time.Millisecond

// waitPools polls /v1/info until every pool is full, so that a warm
// sample really finds a runner (the wait is not measured).
func (d *daemon) waitPools(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := d.client.Info(ctx)
		if err != nil {
			return err
		}
		full := true
		for _, p := range info.Pools {
			if p.Ready < p.Size {
				full = false
			}
		}
		for _, z := range info.Zygotes {
			if z.State != "ready" && z.State != "unused" {
				full = false
			}
		}
		if full {
			// Let the refill's tail (its sandbox's last set-up work, the
			// previous run's teardown) pass, as it has in a pool that sat
			// idle for a moment, which is the case the pool is for.
			time.Sleep(poolSettle)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pools not full (or zygotes not ready) after 2m: %+v %+v", info.Pools, info.Zygotes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// idle polls /v1/info until the daemon runs, queues and tears down
// nothing, then lets the kernel's own clean-up of the last sandboxes pass
// (poolSettle, then measure.Settle), so that one system's rounds do not pay for the
// teardown of the runs before them (the wait is not measured).
func (d *daemon) idle(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := d.client.Info(ctx)
		if err != nil {
			return err
		}
		if info.InFlight == 0 && info.Queued == 0 && info.TearingDown == 0 {
			time.Sleep(poolSettle)
			measure.Settle(ctx)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon was not idle after 2m: %d in flight, %d queued, %d tearing down", info.InFlight, info.Queued, info.TearingDown)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// daemonCase is one kind of request.
type daemonCase struct {
	name   string
	target string
	warm   bool    // wait for full pools before each sample
	pools  *daemon // whose pools (nil: the bench daemon's)
	cold   string  // the case whose p50 this one's is compared with
	do     func(ctx context.Context) (pooled bool, err error)
}

// runRequest is a request that runs code on rootfsName (the daemon's
// default when empty) with lim (the default pool's when nil) and says
// whether it took a warm runner.
func runRequest(cl *client.Client, rootfsName, code string, lim *agentapi.Limits) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		res, err := cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Rootfs: rootfsName, Limits: lim})
		var ae *agentapi.Error
		for errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests { // a --socket daemon with a short queue
			time.Sleep(time.Millisecond)
			res, err = cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Rootfs: rootfsName, Limits: lim})
		}
		if err != nil {
			return false, err
		}
		if res.Status != agentapi.StatusOK {
			return false, fmt.Errorf("status %s: %s%s", res.Status, res.Error, res.Stderr)
		}
		return res.Pooled, nil
	}
}

// coldLimits differ from the default pool's (pids) so that a run starts
// cold at the same cost.
var coldLimits = &agentapi.Limits{Pids: 65}

// Stop ends the daemon: SIGTERM, then SIGKILL if it has not exited within
// grace. Safe to call twice, and from two goroutines.
func (d *daemon) Stop(grace time.Duration) {
	d.stopOnce.Do(func() {
		if d.cmd == nil || d.cmd.Process == nil {
			return
		}
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			_ = d.cmd.Process.Kill()
			<-done
		}
	})
}
