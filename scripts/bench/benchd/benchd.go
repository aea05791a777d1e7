// Package benchd is a daemon the bench measures: a private `nsbox daemon`
// it starts on temp paths (its cgroups named for the interrupt sweep), or
// one at --socket; polling its /v1/info until its pools are full or it is
// idle; stopping it.
package benchd

import (
	"context"
	"fmt"
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

// Daemon is the daemon the bench talks to: a private one it started,
// or one at --socket.
type Daemon struct {
	Client   *client.Client
	Cmd      *exec.Cmd // nil for one at --socket
	NoSettle bool      // Idle does not wait for a quiet CPU (a tiny test's run)
	dir      string
	log      *os.File
	stopOnce sync.Once
}

// Start starts `nsbox daemon` (the binary nsbox) on temp paths with
// its own cgroup name, the config file conf and extra flags.
func Start(nsbox, store, rfs, conf string, extra ...string) (*Daemon, error) {
	dir, err := os.MkdirTemp("", "nsbox-bench-daemon-")
	if err != nil {
		return nil, err
	}
	d := &Daemon{dir: dir, Client: &client.Client{Socket: filepath.Join(dir, "s.sock")}}
	if err := os.WriteFile(filepath.Join(dir, "nsbox.conf"), []byte(conf), 0o600); err != nil {
		d.Close()
		return nil, err
	}
	if d.log, err = os.Create(filepath.Join(dir, "daemon.log")); err != nil {
		d.Close()
		return nil, err
	}
	d.Cmd = exec.Command(nsbox, "daemon", "--config", filepath.Join(dir, "nsbox.conf"), "--socket", d.Client.Socket,
		"--state-dir", filepath.Join(dir, "state"), "--run-dir", filepath.Join(dir, "run"), "--rootfs-store", store,
		"--default-rootfs", rfs, "--queue", "64", "--cgroup-name", interrupt.Name(), "--log-level", "warn")
	d.Cmd.Args = append(d.Cmd.Args, extra...)
	d.Cmd.Stdout, d.Cmd.Stderr = d.log, d.log
	d.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.Cmd.Start(); err != nil {
		d.Close()
		return nil, err
	}
	if err := interrupt.Track(d); err != nil {
		d.Close()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.Client.Health(ctx)
		cancel()
		if err == nil {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.Close()
			return nil, fmt.Errorf("the bench daemon did not answer: %v (log in %s)", err, d.log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close stops the daemon and removes its temp paths.
func (d *Daemon) Close() {
	d.Stop(interrupt.Grace)
	if d.log != nil {
		d.log.Close()
	}
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

// PoolSettle is the pause after the pools are full before a warm sample.
const PoolSettle = 250 * time.Millisecond

// WaitPools polls /v1/info until every pool is full, so that a warm
// sample really finds a runner (the wait is not measured), then lets the
// refill's tail (its sandbox's last set-up work, the previous run's
// teardown) pass, as it has in a pool that sat idle for a moment.
func (d *Daemon) WaitPools(ctx context.Context) error {
	return d.until(ctx, func(info *agentapi.Info) (bool, string) {
		for _, p := range info.Pools {
			if p.Ready < p.Size {
				return false, fmt.Sprintf("pools not full: %+v", info.Pools)
			}
		}
		for _, z := range info.Zygotes {
			if z.State != "ready" && z.State != "unused" {
				return false, fmt.Sprintf("zygotes not ready: %+v", info.Zygotes)
			}
		}
		return true, ""
	})
}

// Idle polls /v1/info until the daemon runs, queues and tears down
// nothing, then lets the kernel's own clean-up of the last sandboxes pass
// (PoolSettle, then measure.Settle unless d.NoSettle), so that one
// system's rounds do not pay for the teardown of the runs before them
// (the wait is not measured).
func (d *Daemon) Idle(ctx context.Context) error {
	if err := d.until(ctx, func(info *agentapi.Info) (bool, string) {
		return info.InFlight == 0 && info.Queued == 0 && info.TearingDown == 0,
			fmt.Sprintf("not idle: %d in flight, %d queued, %d tearing down", info.InFlight, info.Queued, info.TearingDown)
	}); err != nil {
		return err
	}
	if !d.NoSettle {
		measure.Settle(ctx)
	}
	return nil
}

// until polls /v1/info every 5 ms until done says so (then waits
// PoolSettle), for at most 2 minutes (then its error says why not).
func (d *Daemon) until(ctx context.Context, done func(*agentapi.Info) (bool, string)) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := d.Client.Info(ctx)
		if err != nil {
			return err
		}
		ok, why := done(info)
		if ok {
			return measure.Sleep(ctx, PoolSettle)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the bench daemon after 2m: %s", why)
		}
		if err := measure.Sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

// Stop ends the daemon: SIGTERM, then SIGKILL if it has not exited within
// grace. Safe to call twice, and from two goroutines.
func (d *Daemon) Stop(grace time.Duration) {
	d.stopOnce.Do(func() {
		if d.Cmd == nil || d.Cmd.Process == nil {
			return
		}
		_ = d.Cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.Cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			_ = d.Cmd.Process.Kill()
			<-done
		}
	})
}
