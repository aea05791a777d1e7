package container

// maskedPaths are hidden inside the sandbox: runc's default list
// (libcontainer/specconv.Example) plus /proc/interrupts and powercap, which
// leak host detail. Paths the kernel lacks are skipped; /sys is not mounted.
func maskedPaths() []string {
	return []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sched_debug", "/proc/scsi", "/proc/interrupts",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
}

// readOnlyPaths are remounted read-only inside the sandbox (runc's list).
func readOnlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}
