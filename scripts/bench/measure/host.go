package measure

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// MachineLine names the host, its kernel, its cores and its load, the
// first line of the report.
func MachineLine() string {
	host, _ := os.Hostname()
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%s: kernel %s, %d cores, load %s", host, strings.TrimSpace(string(rel)), NumCPU(), LoadAvg())
}

// NumCPU counts the CPUs sysfs lists.
func NumCPU() int {
	n, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*")
	return len(n)
}

// LoadAvg is the host's 1, 5 and 15 minute load averages.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Settle waits, up to 30 s, until the CPUs have been at least 90 % idle
// over a quarter of a second: the kernel's own clean-up after earlier rows
// (thousands of sandboxes' network namespaces and cgroups) goes on after
// the daemons report nothing left, and would land on the next row.
func Settle(ctx context.Context) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return
	}
	prev, err := fs.Stat()
	deadline := time.Now().Add(30 * time.Second)
	for err == nil && ctx.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		cur, e := fs.Stat()
		if e != nil {
			return
		}
		idle := cur.CPUTotal.Idle + cur.CPUTotal.Iowait - prev.CPUTotal.Idle - prev.CPUTotal.Iowait
		if all := cpuSeconds(cur.CPUTotal) - cpuSeconds(prev.CPUTotal); all > 0 && idle/all >= 0.9 {
			return
		}
		prev = cur
	}
}

func cpuSeconds(c procfs.CPUStat) float64 {
	return c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
}
