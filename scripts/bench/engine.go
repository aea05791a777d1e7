package bench

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench/interrupt"
	"github.com/nsbox/nsbox/scripts/bench/measure"
	"github.com/nsbox/nsbox/scripts/bench/peer"
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
	cold, err := container.New(container.Config{CgroupName: interrupt.Name()})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cold.Close()
	warm, err := container.New(container.Config{CgroupName: interrupt.Name(), Spares: 2})
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
			return peer.Quiet(peer.Bwrap(ctx, rfs.Dir, argv))
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
		b, err := peer.NewOCI(ctx, rt.bin, rt.pkg, rt.global, rfs.Dir, argv)
		if err != nil {
			rep.Skipped = append(rep.Skipped, rt.bin+": "+err.Error())
			continue
		}
		defer b.Close()
		systems = append(systems, system{Name: rt.name, Note: rt.note, run: b.Run})
	}
	if p, err := peer.NewPodman(ctx, rfs.Dir, argv); err == nil {
		defer p.Close()
		systems = append(systems, system{Name: "podman run --rm", Note: "an image of the same rootfs, runc, --network none", run: p.Run})
	} else {
		rep.Skipped = append(rep.Skipped, "podman: "+err.Error())
	}
	systems = append(systems, system{Name: "bare python3", Note: "chroot, no isolation", run: func(ctx context.Context) error {
		return peer.Quiet(exec.CommandContext(ctx, "chroot", append([]string{rfs.Dir}, argv...)...))
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
				n, err := measure.Round(ctx, s.run, conc, o.Round)
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
