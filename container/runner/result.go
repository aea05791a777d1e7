package runner

import "time"

// Status is the outcome of one cell.
type Status string

// Cell statuses. StatusOOM, StatusCrashed and a Result with Killed set mean
// the runner is dead: later Execs fail with ErrDead.
const (
	StatusOK          Status = "ok"           // the cell ran to its end
	StatusException   Status = "exception"    // the cell raised
	StatusTimeout     Status = "timeout"      // the cell passed its timeout and was interrupted (or killed)
	StatusCancelled   Status = "cancelled"    // the caller's context ended; interrupted (or killed)
	StatusOOM         Status = "oom"          // the sandbox ran out of memory; the runner is gone
	StatusCrashed     Status = "crashed"      // the interpreter exited or died; the runner is gone
	StatusOutputLimit Status = "output_limit" // stdout or stderr passed its cap; interrupted (or killed)
	StatusClosed      Status = "closed"       // Close was called (only from Dead)
	StatusKilled      Status = "killed"       // Kill was called (only from Dead)
)

// Result is the outcome of one cell.
type Result struct {
	Status Status
	// Count is the cell's execution count (1, 2, ...); 0 when the runner
	// died before answering.
	Count int
	// Value is the repr of the cell's last expression (capped at 64 KiB),
	// "" when the cell does not end with an expression or it is None.
	Value     string
	Exception *Exception
	Figures   []Figure
	// ValueData is the last expression's data as JSON, when it is a
	// pandas DataFrame (at most 100,000 cells): {column: [values]}.
	ValueData []byte
	// ValueMime is the last expression's rich forms (its _repr_html_,
	// _repr_markdown_, _repr_svg_, _repr_latex_, _repr_json_) by MIME
	// type: text/html, text/markdown, image/svg+xml, text/latex,
	// application/json (JSON text).
	ValueMime map[string]string

	Stdout, Stderr                   []byte // capped at ExecRequest.OutputBytes each
	StdoutBytes, StderrBytes         int64  // produced, including what was cut
	StdoutTruncated, StderrTruncated bool

	Wall time.Duration
	// Killed: the sandbox was killed while the cell ran (it did not stop
	// after its interrupt, or its output passed the cap of a KillOnOverflow
	// exec or the runner's lifetime cap); the runner is dead.
	Killed bool
	// Error says why the runner died, when it did.
	Error string
}
