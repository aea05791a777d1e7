package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/policy"
)

// runDaemonFlags runs `nsbox daemon ARGS` far enough to load its
// configuration.
func runDaemonFlags(t *testing.T, args ...string) (config.Config, error) {
	t.Helper()
	cmd := daemonCommand()
	var (
		got  config.Config
		lerr error
	)
	cmd.Action = func(c *cli.Context) error {
		got, lerr = loadConfig(c)
		return nil
	}
	app := &cli.App{Commands: []*cli.Command{cmd}}
	if err := app.Run(append([]string{"nsbox", "daemon"}, args...)); err != nil {
		t.Fatal(err)
	}
	return got, lerr
}

// TestConfigPrecedence: flags beat environment, which beats the file.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(file, []byte("socket = \"/file.sock\"\nmax_concurrent = 7\nlog_format = \"json\"\nqueue = 5\n[sessions]\nmax = 3\nidle_timeout = \"1m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NSBOX_MAX_CONCURRENT", "9")
	t.Setenv("NSBOX_LOG_FORMAT", "text")
	t.Setenv("NSBOX_SESSION_IDLE_TIMEOUT", "2m")
	got, err := runDaemonFlags(t, "--config", file, "--log-format", "json", "--state-dir", "/st", "--max-sessions", "4")
	if err != nil {
		t.Fatal(err)
	}
	if got.Socket != "/file.sock" || got.MaxConcurrent != 9 || got.LogFormat != "json" || *got.Queue != 5 || got.RootfsStore != "/st/rootfs" ||
		got.Sessions.Max != 4 || got.Sessions.IdleTimeout != 2*time.Minute {
		t.Errorf("config = %+v", got)
	}
}

// TestFlagKeys: every daemon flag but --config and --check-config sets a
// configuration key, and config.Load takes each flag's value for its key.
func TestFlagKeys(t *testing.T) {
	var mapped []string
	for _, f := range flagKeys {
		mapped = append(mapped, f.flag)
	}
	for _, f := range daemonCommand().Flags {
		if n := f.Names()[0]; n != "config" && n != "check-config" && !slices.Contains(mapped, n) {
			t.Errorf("flag --%s sets no configuration key", n)
		}
	}
	got, err := runDaemonFlags(t, "--socket", "/s.sock", "--state-dir", "/st", "--run-dir", "/r", "--rootfs-store", "/rs",
		"--default-rootfs", "minimal", "--log-format", "json", "--log-level", "debug", "--metrics-listen", "127.0.0.1:1",
		"--cgroup-name", "x", "--max-concurrent", "2", "--queue", "0", "--shutdown-grace", "1s",
		"--max-sessions", "5", "--session-idle-timeout", "1m", "--session-max-lifetime", "1h", "--session-idle-action", "pause",
		"--pool-size", "1", "--pool-refills", "2", "--spare-inits", "0", "--pool-preimport", "numpy", "--zygote=false")
	if err != nil {
		t.Fatal(err)
	}
	want := config.Sessions{Max: 5, IdleTimeout: time.Minute, MaxLifetime: time.Hour, IdleAction: "pause", ParkMaxBytes: policy.DefaultParkMaxBytes, ParkRetention: policy.DefaultParkRetention, CommandOutputBytes: config.DefaultCommandOutputBytes}
	if got.Socket != "/s.sock" || got.CgroupName != "x" || *got.Queue != 0 || got.Sessions != want || got.Pool.SpareInits != 0 ||
		!slices.Equal(got.Pool.Preimport, []string{"numpy"}) || got.Zygote.Enabled {
		t.Errorf("config = %+v", got)
	}
}

// TestDaemonRefusesMissingDefaultRootfs: `nsbox daemon` on a store without
// its default rootfs exits 1 at once, saying how to build it (it started
// and logged WARN lines from the pool and zygotes, several a second, while
// every request that named no rootfs failed).
func TestDaemonRefusesMissingDefaultRootfs(t *testing.T) {
	dir := t.TempDir()
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, stderr, code := runApp(t, "", "daemon", "--socket", filepath.Join(dir, "d.sock"), "--state-dir", filepath.Join(dir, "state"),
			"--run-dir", filepath.Join(dir, "run"), "--rootfs-store", filepath.Join(dir, "store"), "--cgroup-name", fmt.Sprintf("nsbox-test-rootfs-%d", os.Getpid()))
		done <- result{stderr, code}
	}()
	select {
	case r := <-done:
		if r.code != 1 || !strings.Contains(r.stderr, `the default rootfs "default" is not in the store`) ||
			!strings.Contains(r.stderr, "nsbox rootfs build --profile datasci --name default") {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the daemon started without its default rootfs")
	}
}
