package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
)

// system is one way of running the command in the engine part.
type system struct {
	Name string
	Note string
	run  func(ctx context.Context) error
}

// benchEngine is the engine part: nsbox's engine in-process against the
// baselines.
func benchEngine(ctx context.Context, o Options, rep *report, rfs *rootfs.Rootfs, argv []string) ([]system, error) {
	cold, err := container.New(container.Config{CgroupName: "nsbox-bench-" + container.NewID()[:6]})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cold.Close()
	warm, err := container.New(container.Config{CgroupName: "nsbox-bench-" + container.NewID()[:6], Spares: 2})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer warm.Close()
	engineRun := func(e *container.Engine) func(context.Context) error {
		return func(ctx context.Context) error {
			res, err := e.Run(ctx, container.Spec{RootfsDir: rfs.Dir, Argv: argv})
			if err == nil && res.Status != container.StatusOK {
				err = fmt.Errorf("status %s: %s", res.Status, res.Stderr)
			}
			return err
		}
	}
	systems := []system{
		{Name: "nsbox (cold)", Note: "clone + cgroup placement on demand", run: engineRun(cold)},
		{Name: "nsbox (spare init)", Note: "init cloned and placed ahead of time", run: engineRun(warm)},
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		systems = append(systems, system{Name: "bwrap", Note: "--unshare-all, no seccomp, no cgroup", run: func(ctx context.Context) error {
			return quiet(bwrapCommand(ctx, rfs.Dir, argv))
		}})
	} else {
		rep.Skipped = append(rep.Skipped, "bwrap: not installed (apt-get install bubblewrap)")
	}
	for _, rt := range []struct {
		bin, pkg, name, note string
		global               []string
	}{
		{"runc", "runc", "runc run", "Debian's runc, default spec (no userns, no seccomp)", nil},
		{"crun", "crun", "crun run", "Debian's crun, the same spec", nil},
		{"runsc", "runsc", "gVisor runsc run", "Debian's runsc (ptrace platform), the same spec, no network", []string{"--network=none"}},
	} {
		b, err := newOCIBaseline(ctx, rt.bin, rt.pkg, rt.global, rfs.Dir, argv)
		if err != nil {
			rep.Skipped = append(rep.Skipped, rt.bin+": "+err.Error())
			continue
		}
		defer b.close()
		systems = append(systems, system{Name: rt.name, Note: rt.note, run: b.run})
	}
	if p, err := newPodmanBaseline(ctx, rfs.Dir, argv); err == nil {
		defer p.close()
		systems = append(systems, system{Name: "podman run --rm", Note: "an image of the same rootfs, runc, --network none", run: p.run})
	} else {
		rep.Skipped = append(rep.Skipped, "podman: "+err.Error())
	}
	systems = append(systems, system{Name: "bare python3", Note: "chroot, no isolation", run: func(ctx context.Context) error {
		return quiet(exec.CommandContext(ctx, "chroot", append([]string{rfs.Dir}, argv...)...))
	}})

	// Latency: one run of each system per round, in turn.
	names := make([]string, len(systems))
	samples := make([][]time.Duration, len(systems))
	for i, s := range systems {
		names[i] = s.Name
	}
	for range o.Runs {
		for i, s := range systems {
			t0 := time.Now()
			if err := s.run(ctx); err != nil {
				return nil, fmt.Errorf("bench: %s: %w", s.Name, err)
			}
			samples[i] = append(samples[i], time.Since(t0))
		}
	}
	rep.Latency = engineLatency(names, samples)

	// Throughput: rounds of fixed length, systems in turn.
	for _, conc := range o.Concurrency {
		rates := make([][]float64, len(systems))
		for range o.Rounds {
			for i, s := range systems {
				if s.Name == "bare python3" {
					continue
				}
				n, err := throughputRound(ctx, s.run, conc, o.Round)
				if err != nil {
					return nil, fmt.Errorf("bench: %s at concurrency %d: %w", s.Name, conc, err)
				}
				rates[i] = append(rates[i], n)
			}
		}
		rep.Throughput = append(rep.Throughput, engineThroughput(names, conc, rates)...)
	}

	return systems, nil
}

func quiet(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// bwrapCommand is the baseline: bubblewrap with every namespace unshared,
// the same rootfs read-only, fresh /proc, /dev and /tmp, uid 1000.
func bwrapCommand(ctx context.Context, root string, argv []string) *exec.Cmd {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/tmp", "--tmpfs", "/workspace", "--chdir", "/workspace",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/workspace",
		"--uid", "1000", "--gid", "1000", "--",
	}
	return exec.CommandContext(ctx, "bwrap", append(args, argv...)...)
}
