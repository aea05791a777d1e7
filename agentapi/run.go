package agentapi

import "encoding/json"

// Languages accepted in RunRequest.Language.
const (
	LanguagePython = "python"
	LanguageBash   = "bash"
	// JavaScript and TypeScript run on Node.js, on a rootfs that has it
	// (the data-science profile does): TypeScript has its types stripped
	// (esbuild, in the sandbox) and is not type-checked.
	LanguageJavaScript = "javascript"
	LanguageTypeScript = "typescript"
	// R and Java run on a rootfs that has them (the polyglot profile):
	// R as a one-shot Rscript, and both beside a session's interpreter
	// (E2B's code interpreter), R in one R session, Java in JShell.
	LanguageR    = "r"
	LanguageJava = "java"
)

// RunRequest is the body of POST /v1/runs. Exactly one of Argv or
// Language+Code is set.
type RunRequest struct {
	// Argv is the command to run; Argv[0] is looked up in PATH inside the
	// sandbox.
	Argv []string `json:"argv,omitempty"`
	// Language ("python", "bash", "javascript", "typescript" or one the
	// operator declared) and Code run a snippet instead of Argv.
	Language string `json:"language,omitempty"`
	Code     string `json:"code,omitempty"`
	// Stdin is fed to the command's standard input (UTF-8 text).
	Stdin string `json:"stdin,omitempty"`
	// Files are written into /workspace before the command starts.
	Files []File `json:"files,omitempty"`
	// Env holds extra environment variables on top of the sandbox's clean base.
	Env map[string]string `json:"env,omitempty"`
	// Limits bound the run; zero or absent fields take the daemon's defaults,
	// and values above the daemon's maxima are refused.
	Limits *Limits `json:"limits,omitempty"`
	// Profile names a security profile (GET /v1/info lists them) whose
	// limits apply to the fields Limits leaves zero; empty means none.
	Profile string `json:"profile,omitempty"`
	// Rootfs names the root filesystem; empty means the daemon's default.
	Rootfs string `json:"rootfs,omitempty"`
	// ReturnFiles are glob patterns (path.Match syntax, relative to
	// /workspace) of files whose content is returned inline, capped in total.
	ReturnFiles []string `json:"return_files,omitempty"`
	// AllowedImports, for Python code only, lists the modules the code may
	// import (a name allows its submodules too); importing any other module
	// raises ImportError. Absent or null means no restriction, an empty list
	// allows no import. Modules import what they need freely: the list
	// binds the code's own imports. A policy aid for an agent's developer,
	// not a security boundary (the sandbox is); see docs/PYTHON.md.
	AllowedImports []string `json:"allowed_imports"`
	// Network asks for egress through the daemon's proxy; absent means
	// none (loopback only). See docs/NETWORK.md.
	Network *Network `json:"network,omitempty"`
	// Volumes are named volumes to mount under /mnt (docs/VOLUMES.md).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Datasets name the operator's read-only host datasets to mount at
	// /mnt/NAME (GET /v1/info lists them).
	Datasets []string `json:"datasets,omitempty"`
	// Init makes the sandbox's pid 1 a minimal init, as `docker run
	// --init` does: it forwards signals to the command, reaps orphans and
	// exits with the command's status, 128+N when signal N ended it.
	// Absent or false, the command is pid 1 (docs/API.md, "PID 1").
	// Code runs on the engine as its language's one-shot program.
	Init bool `json:"init,omitempty"`
}

// File is an input file. At most one of ContentBase64 and Text is set;
// neither means an empty file.
type File struct {
	// Path is relative to /workspace: not empty, not absolute, no ".."
	// element, no NUL, in clean form ("a/b", not "./a//b").
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64,omitempty"`
	Text          string `json:"text,omitempty"`
	// Mode holds permission bits (at most 0o777); 0 means 0o644.
	Mode uint32 `json:"mode,omitempty"`
}

// Limits bound the resources of one run. Zero means "the daemon's default".
type Limits struct {
	TimeoutMs   int64   `json:"timeout_ms,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	DiskBytes   int64   `json:"disk_bytes,omitempty"`
	OutputBytes int64   `json:"output_bytes,omitempty"` // per stream
}

// Run statuses, as decided by the engine.
const (
	StatusOK          = "ok"
	StatusExitNonzero = "exit_nonzero"
	StatusTimeout     = "timeout"
	StatusOOM         = "oom"
	StatusOutputLimit = "output_limit"
	StatusKilled      = "killed"
	StatusError       = "error"
	// Statuses of Python code run through the runner (runs and session execs).
	StatusException = "exception" // the code raised; see RunResult.Exception
	StatusCancelled = "cancelled" // the caller went away; the cell was interrupted
	StatusCrashed   = "crashed"   // the interpreter died (a session is dead after it)
)

// RunResult is the response of POST /v1/runs (and the payload of the final
// "result" stream event).
//
// Stdout and Stderr are always UTF-8 text. When a stream's bytes are not
// valid UTF-8, Stdout holds them with invalid sequences replaced by U+FFFD
// and StdoutBase64 holds the exact bytes (likewise for stderr); when they are
// valid, the *_base64 field is absent.
type RunResult struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`

	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBase64    string `json:"stdout_base64,omitempty"`
	StderrBase64    string `json:"stderr_base64,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"` // produced, including what was cut
	StderrBytes     int64  `json:"stderr_bytes"`

	WallMs          int64 `json:"wall_ms"`
	CPUMs           int64 `json:"cpu_ms"`
	MemoryPeakBytes int64 `json:"memory_peak_bytes"`

	Files []FileResult `json:"files,omitempty"`
	// FilesTruncated says Files stops at its cap (10,000 files): the
	// workspace held more, and changed files may be missing.
	FilesTruncated bool `json:"files_truncated,omitempty"`

	// Rich results of Python code (runs with language "python" and session
	// execs). Value is the repr of the last expression, when the code ends
	// with one that is not None. Exception is set with status "exception"
	// (and "timeout": the KeyboardInterrupt). Figures are the matplotlib
	// figures open at the end or shown, and the images shown with
	// display() (PIL's show and save too) or ending the code. ValueData is
	// the last expression's data when it is a pandas DataFrame:
	// {column: [values]}. ValueMime is the last expression's rich forms by
	// MIME type, as IPython finds them (its _repr_html_, _repr_markdown_,
	// _repr_svg_, _repr_latex_, _repr_json_): text/html, text/markdown,
	// image/svg+xml, text/latex, application/json (JSON text).
	// ExecutionCount numbers a session's execs from 1.
	Value          string            `json:"value,omitempty"`
	ValueData      json.RawMessage   `json:"value_data,omitempty"`
	ValueMime      map[string]string `json:"value_mime,omitempty"`
	Exception      *Exception        `json:"exception,omitempty"`
	Figures        []Figure          `json:"figures,omitempty"`
	ExecutionCount int               `json:"execution_count,omitempty"`
	// SessionDead is set on a session exec that ended the session (OOM,
	// crash, a cell that ignored its interrupt); Error says why.
	SessionDead bool `json:"session_dead,omitempty"`
	// Revived is set on a session exec that revived a parked session
	// first; NotCarried lists what its state left behind then.
	Revived    bool         `json:"revived,omitempty"`
	NotCarried []NotCarried `json:"not_carried,omitempty"`
	// Pooled is set when the run took a runner from the warm pool (its
	// time limit then counts from when its code was handed over).
	Pooled bool `json:"pooled,omitempty"`
	// Network is the egress audit of a run that had a network policy.
	Network *NetworkReport `json:"network,omitempty"`
}

// Exception is a Python exception: its type name, str() and traceback
// (frames of nsbox's runner removed; lines of the user's code shown as
// File "<cell N>").
type Exception struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// Figure is an image output as PNG: a matplotlib figure, or an image
// shown. Chart is a matplotlib figure's data (its type, title, axes and
// elements: docs/API.md, "Charts"), when it holds any.
type Figure struct {
	Mime       string          `json:"mime"`
	DataBase64 string          `json:"data_base64"`
	Chart      json.RawMessage `json:"chart,omitempty"`
}

// FileResult describes a workspace file the run created or changed.
// ContentBase64 is set for files that matched ReturnFiles.
type FileResult struct {
	Path          string `json:"path"`
	Size          int64  `json:"size"`
	SHA256        string `json:"sha256"`
	Mime          string `json:"mime,omitempty"`
	Mode          uint32 `json:"mode"`
	ContentBase64 string `json:"content_base64,omitempty"`
}
