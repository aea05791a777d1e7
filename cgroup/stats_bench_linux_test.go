package cgroup

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
)

// BenchmarkStats compares Cgroup.Stats, which reads the five files the end
// of every run needs, with github.com/containerd/cgroups/v3 reading the same
// sandbox cgroup: cgroup1 with its subsystems limited to the five this
// package uses, cgroup2 limited to the pids, CPU and memory statistics. The
// cgroup holds the counters of a finished process, as at the end of a run.
// The figures decide which reader the end of a run uses (docs/ARCHITECTURE.md,
// "Libraries for /proc and cgroup files"). On a hybrid host "unified" repeats
// the v2 pair on the controller-less cgroup2, where only cpu.stat exists.
func BenchmarkStats(b *testing.B) {
	benchStats(b, newTestManager(b))
	b.Run("unified", func(b *testing.B) { benchStats(b, newUnifiedManager(b)) })
}

func benchStats(b *testing.B, m *Manager) {
	var l Limits
	if m.Has("memory") && m.Has("pids") && m.Has("cpu") {
		l = Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1}
	}
	c, err := m.Create("stats", l)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Kill(); c.Delete() })
	// A process that reads 32 MiB through an 8 MiB buffer, then exits.
	work := exec.Command("/bin/sh", "-c", "read x; dd if=/dev/zero of=/dev/null bs=8M count=4 2>/dev/null")
	in, err := work.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := work.Start(); err != nil {
		b.Fatal(err)
	}
	if err := c.Add(work.Process.Pid); err != nil {
		work.Process.Kill()
		b.Fatal(err)
	}
	in.Write([]byte("go\n"))
	if err := work.Wait(); err != nil {
		b.Fatal(err)
	}
	hand, err := c.Stats()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Stats(); err != nil {
				b.Fatal(err)
			}
		}
	})
	if m.v2 {
		g, err := cgroup2.Load("/"+filepath.Base(c.hier[0].path), cgroup2.WithMountpoint(filepath.Dir(c.hier[0].path)))
		if err != nil {
			b.Fatal(err)
		}
		const mask = cgroup2.StatPids | cgroup2.StatCPU | cgroup2.StatMemory | cgroup2.StatMemoryEvents
		st, err := g.StatFiltered(mask)
		if err != nil || uint64(hand.CPUUsage.Microseconds()) != st.CPU.UsageUsec {
			b.Fatalf("cgroup2: %v, %v; hand-read CPU %v", st, err, hand.CPUUsage)
		}
		b.Run("cgroups-v3", func(b *testing.B) {
			for b.Loop() {
				if _, err := g.StatFiltered(mask); err != nil {
					b.Fatal(err)
				}
			}
		})
		return
	}
	load := v1Loader(b, c)
	g, err := load()
	if err != nil {
		b.Fatal(err)
	}
	st, err := g.Stat(cgroup1.IgnoreNotExist)
	if err != nil || uint64(hand.MemoryPeakBytes) != st.Memory.Usage.Max || uint64(hand.CPUUsage) != st.CPU.Usage.Total {
		b.Fatalf("cgroup1: %v, %v; hand-read %+v", st, err, hand)
	}
	b.Run("cgroups-v3", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.Stat(cgroup1.IgnoreNotExist); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A sandbox would load its cgroup once, at creation or at the end.
	b.Run("cgroups-v3-load", func(b *testing.B) {
		for b.Loop() {
			g, err := load()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := g.Stat(cgroup1.IgnoreNotExist); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// v1Loader returns a cgroup1.Load of c limited to the subsystems c uses.
func v1Loader(b *testing.B, c *Cgroup) func() (cgroup1.Cgroup, error) {
	l, err := LocateSelf()
	if err != nil {
		b.Fatal(err)
	}
	var subs []cgroup1.Subsystem
	rel := make(map[cgroup1.Name]string)
	for ctrl, dir := range c.dir {
		mp := l.V1Mounts[ctrl]
		if filepath.Base(mp) != ctrl {
			b.Skipf("v1 %s mounted at %s: cgroup1 wants <root>/%s", ctrl, mp, ctrl)
		}
		root := filepath.Dir(mp)
		switch ctrl {
		case "memory":
			subs = append(subs, cgroup1.NewMemory(root, cgroup1.OptionalSwap()))
		case "pids":
			subs = append(subs, cgroup1.NewPids(root))
		case "cpu":
			subs = append(subs, cgroup1.NewCpu(root))
		case "cpuacct":
			subs = append(subs, cgroup1.NewCpuacct(root))
		case "freezer":
			subs = append(subs, cgroup1.NewFreezer(root))
		}
		rel[cgroup1.Name(ctrl)] = strings.TrimPrefix(dir.path, mp)
	}
	hier := cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return subs, nil })
	path := func(n cgroup1.Name) (string, error) { return rel[n], nil }
	return func() (cgroup1.Cgroup, error) { return cgroup1.Load(path, hier) }
}
