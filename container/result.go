package container

import "time"

// Status is the verdict of a run.
type Status string

// Statuses, in the order the engine decides them: a limit verdict wins over
// the exit status it caused.
const (
	StatusOK          Status = "ok"           // exited 0
	StatusExitNonzero Status = "exit_nonzero" // exited with a non-zero code
	StatusTimeout     Status = "timeout"      // the deadline passed; the whole tree was killed
	StatusOOM         Status = "oom"          // the memory limit killed a process
	StatusOutputLimit Status = "output_limit" // stdout or stderr passed its cap; killed
	StatusKilled      Status = "killed"       // ended by a signal (or cancelled by the caller)
	StatusError       Status = "error"        // the sandbox could not be set up
)

// Result is everything known about a finished run.
type Result struct {
	ID       string `json:"id"`
	Status   Status `json:"status"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`

	Stdout          []byte `json:"stdout"`
	Stderr          []byte `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"` // total produced, including what was cut
	StderrBytes     int64  `json:"stderr_bytes"`

	WallTime        time.Duration `json:"wall_time"`
	CPUTime         time.Duration `json:"cpu_time"`
	MemoryPeakBytes int64         `json:"memory_peak_bytes"`

	Files []FileInfo `json:"files,omitempty"`
	// FilesTruncated says Files stops at workspace.MaxListed.
	FilesTruncated bool `json:"files_truncated,omitempty"`
}
