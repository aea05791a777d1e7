package runner

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/nsbox/nsbox/container/internal/frame"
)

// MaxFrameBytes bounds one frame from the runner (figures are inline, as
// base64 PNG).
const MaxFrameBytes = 256 << 20

// request is one cell sent to the runner.
type request struct {
	Code   string `json:"code"`
	Marker string `json:"marker"`
	// Setup makes the request a set-up step instead of a cell (Code is
	// ignored): import Preimport and warm the cell path once. It binds no
	// name and is not counted.
	Setup     bool     `json:"setup,omitempty"`
	Preimport []string `json:"preimport,omitempty"`
	// Stream runs the cell line-buffered: a caller watches its output live.
	Stream bool `json:"stream,omitempty"`
	// AllowedImports, when set, restricts the cell's own imports to these
	// modules and their submodules (an empty list: none).
	AllowedImports *[]string `json:"allowed_imports,omitempty"`
	// Context names the namespace the cell runs in ("": the default
	// __main__).
	Context string `json:"context,omitempty"`
	// Env is set in os.environ for the cell only.
	Env map[string]string `json:"env,omitempty"`
	// Lang is the cell's Transform: "ts" makes a Node runner strip its TypeScript types
	// first; "" is the runner's own language.
	Lang string `json:"lang,omitempty"`
	// NoInterrupt tells the runner that the host kills the sandbox rather
	// than interrupt this cell (ExecRequest.KillOnTimeout): a Node runner
	// then runs it without breakOnSigint. Python's runner ignores it.
	NoInterrupt bool `json:"no_interrupt,omitempty"`
	// Fence makes the request no cell: the runner writes Marker on stdout
	// and stderr and replies, so that the host knows all output written
	// before it has passed.
	Fence bool `json:"fence,omitempty"`
	// StopThreads makes a fence end the threads the last cell started
	// first (Python; a Node runner has none to end).
	StopThreads bool `json:"stop_threads,omitempty"`
}

// agentRequest asks the runner to fork the process agent, which runs
// Source; one byte carrying the agent's socket follows the frame.
type agentRequest struct {
	Agent  bool   `json:"agent"`
	Source string `json:"source"`
}

// dropRequest makes the runner forget a named context (or empty the
// default one).
type dropRequest struct {
	Drop string `json:"drop_context"`
}

// homeRequest makes the runner's working directory and $HOME dir, for
// it and what it starts from then on (the process agent, a cell's
// children); a directory that does not exist changes nothing.
type homeRequest struct {
	Home string `json:"home"`
}

// stateRequest asks a Python runner to snapshot its user state into the
// memfd that follows the frame (one byte carrying it, as for an agent),
// or to restore it from one.
type stateRequest struct {
	Snapshot bool  `json:"snapshot,omitempty"`
	Restore  bool  `json:"restore,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// reply is the runner's answer to one cell (or its first "ready" frame).
type reply struct {
	Ready     bool       `json:"ready,omitempty"`
	Pid       int        `json:"pid,omitempty"` // ready: the interpreter's pid in the sandbox
	Count     int        `json:"count"`
	Value     *string    `json:"value,omitempty"`
	Exception *Exception `json:"exception,omitempty"`
	Figures   []Figure   `json:"figures,omitempty"`
	// ValueData is the last expression's data, when it is a pandas
	// DataFrame: {column: [values]}.
	ValueData json.RawMessage `json:"value_data,omitempty"`
	// ValueMime is the last expression's rich forms by MIME type.
	ValueMime map[string]string `json:"value_mime,omitempty"`
	Unmarked  bool              `json:"unmarked,omitempty"` // a marker could not be written
	Skipped   []string          `json:"skipped,omitempty"`  // modules a setup could not import
	// ElapsedUs is the cell's run time as the runner measured it, inside
	// the sandbox.
	ElapsedUs int64 `json:"elapsed_us,omitempty"`
	// Stopped and Left answer a fence with StopThreads: the threads the
	// last cell started that were sent SystemExit, and those still alive.
	Stopped int `json:"stopped,omitempty"`
	Left    int `json:"left,omitempty"`
	// Dropped answers a dropRequest: the context existed.
	Dropped bool `json:"dropped,omitempty"`
	// AgentPid answers an agentRequest: the agent's pid in the sandbox.
	AgentPid int `json:"agent_pid,omitempty"`
	// SnapshotBytes answers a snapshot: the bytes written to the memfd.
	SnapshotBytes int64 `json:"snapshot_bytes,omitempty"`
	// NotCarried answers a snapshot or a restore: the names left behind.
	NotCarried []NotCarried `json:"not_carried,omitempty"`
	// OverCap: a snapshot stopped at its max_bytes.
	OverCap bool `json:"over_cap,omitempty"`
	// Home answers a homeRequest: the working directory now.
	Home string `json:"home,omitempty"`
	// Error says why a request that is not a cell failed.
	Error string `json:"error,omitempty"`
}

// Exception is an exception raised by a cell.
type Exception struct {
	Name      string `json:"name"`      // the type, e.g. "ZeroDivisionError"
	Value     string `json:"value"`     // str(exception)
	Traceback string `json:"traceback"` // formatted, frames of the runner removed
}

// Figure is one image a cell showed: a matplotlib figure, or an image
// passed to display() (PIL's show and save too), or the last
// expression's when it has one.
type Figure struct {
	MIME string `json:"mime"`
	Data []byte `json:"data_base64"` // JSON: base64
	// Chart is a matplotlib figure's data (charts.py), when it has any.
	Chart json.RawMessage `json:"chart,omitempty"`
}

// writeFrame writes v as one frame: a 4-byte big-endian length, then JSON.
func writeFrame(w io.Writer, v any) error { return frame.Write(w, v) }

// readFrame reads one frame's payload, refusing lengths above max.
func readFrame(r io.Reader, max int) ([]byte, error) { return frame.Read(r, max) }

// readReply reads and decodes one reply frame.
func readReply(r io.Reader) (*reply, error) {
	b, err := readFrame(r, MaxFrameBytes)
	if err != nil {
		return nil, err
	}
	var rep reply
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return &rep, nil
}
