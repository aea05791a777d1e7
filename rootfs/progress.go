package rootfs

import "fmt"

// Progress is one step of a build or an import, for a live display.
type Progress struct {
	Phase   string  // setup, download, extract, install, customize, trim, check, finalize
	Percent float64 // 0-100, or -1 when unknown
	Message string
}

// HumanSize formats bytes as "1.2 GiB" (powers of 1024).
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
