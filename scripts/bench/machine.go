package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// machineLine names the host, its kernel, its cores and its load, the
// first line of the report.
func machineLine() string {
	host, _ := os.Hostname()
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%s: kernel %s, %d cores, load %s", host, strings.TrimSpace(string(rel)), numCPU(), loadAvg())
}

// numCPU counts the CPUs sysfs lists.
func numCPU() int {
	n, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*")
	return len(n)
}

// loadAvg is the host's 1, 5 and 15 minute load averages.
func loadAvg() string {
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
