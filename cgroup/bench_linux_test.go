package cgroup

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkCreateAddDelete measures one sandbox cgroup's life: Create with
// limits, Add a pid, move it out again, Delete. add-ns/op is the cost of Add
// alone. On v1 a move into a cgroup waits for an RCU grace period unless one
// happened moments ago, so the "idle" variants pause 50 ms (untimed) before
// each iteration, as a daemon between spawns would, and the "hot" ones run
// back to back.
func BenchmarkCreateAddDelete(b *testing.B) {
	m := newTestManager(b)
	home, pid := benchSleeper(b)

	// moveHome puts the sleeper back where it started so the leaf can be
	// deleted.
	moveHome := func(b *testing.B) {
		if m.v2 {
			b.Skip("v2: use CLONE_INTO_CGROUP; Add is the fallback")
		}
		for _, c := range v1Controllers {
			if dir, ok := home.V1[c]; ok {
				if err := writeFile(pathDir(dir), "cgroup.procs", strconv.Itoa(pid)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for _, mode := range []struct {
		name string
		add  func(*Cgroup, int) error
	}{
		{"sequential", (*Cgroup).Add},
		{"parallel", (*Cgroup).AddParallel},
	} {
		for _, idle := range []time.Duration{0, 50 * time.Millisecond} {
			name := mode.name + "/hot"
			if idle > 0 {
				name = mode.name + "/idle"
			}
			b.Run(name, func(b *testing.B) {
				var create, add, del time.Duration
				i := 0
				for b.Loop() {
					if idle > 0 {
						b.StopTimer()
						time.Sleep(idle)
						b.StartTimer()
					}
					t0 := time.Now()
					c, err := m.Create("bench-"+strconv.Itoa(i), Limits{MemoryBytes: 512 << 20, Pids: 64, CPUs: 1})
					if err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if err := mode.add(c, pid); err != nil {
						b.Fatal(err)
					}
					t2 := time.Now()
					moveHome(b)
					t3 := time.Now()
					if err := c.Delete(); err != nil {
						b.Fatal(err)
					}
					t4 := time.Now()
					create += t1.Sub(t0)
					add += t2.Sub(t1)
					del += t4.Sub(t3)
					i++
				}
				n := float64(i)
				b.ReportMetric(float64(create.Nanoseconds())/n, "create-ns/op")
				b.ReportMetric(float64(add.Nanoseconds())/n, "add-ns/op")
				b.ReportMetric(float64(del.Nanoseconds())/n, "delete-ns/op")
			})
		}
	}
}

// BenchmarkLifecycle is the cgroup work of one sandbox run as the daemon
// does it: Create with limits, Add a pid, Stats at the end, Kill (the pid
// is gone: moved back home here, untimed, in place of an exit) and Delete.
// cpu-ns/op is this process's CPU time (user+system, all threads), the
// figure the daemon pays per sandbox; ns/op also holds the kernel's waits.
func BenchmarkLifecycle(b *testing.B) {
	m := newTestManager(b)
	if m.v2 {
		b.Skip("v2: a pid is born in its cgroup (CLONE_INTO_CGROUP)")
	}
	home, spid := benchSleeper(b)
	pid := strconv.Itoa(spid)
	var cpu, moves time.Duration
	i := 0
	for b.Loop() {
		c0 := cpuTime(b)
		c, err := m.Create("bench-"+strconv.Itoa(i), Limits{MemoryBytes: 512 << 20, Pids: 64, CPUs: 1})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Add(spid); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Stats(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m0 := cpuTime(b)
		for _, ctrl := range v1Controllers {
			if dir, ok := home.V1[ctrl]; ok {
				if err := writeFile(pathDir(dir), "cgroup.procs", pid); err != nil {
					b.Fatal(err)
				}
			}
		}
		moves += cpuTime(b) - m0
		b.StartTimer()
		if err := c.Kill(); err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime(b) - c0
		i++
	}
	b.ReportMetric(float64((cpu-moves).Nanoseconds())/float64(i), "cpu-ns/op")
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSleeper starts a process to move between cgroups (killed at the
// end) and returns it with this process's own cgroups, where it starts.
func benchSleeper(b *testing.B) (home Layout, pid int) {
	home, err := LocateSelf()
	if err != nil {
		b.Fatal(err)
	}
	sleeper := exec.Command("sleep", "1000")
	if err := sleeper.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	return home, sleeper.Process.Pid
}
