package agentapi

import "time"

// SessionRequest is the body of POST /v1/sessions.
type SessionRequest struct {
	// Rootfs names the root filesystem; empty means the daemon's default.
	Rootfs string `json:"rootfs,omitempty"`
	// Language is the session's interpreter: "python" (empty), or
	// "javascript" or "typescript" (a Node.js runner; a TypeScript
	// session's cells have their types stripped).
	Language string `json:"language,omitempty"`
	// Limits hold for the session's whole life (memory, pids, cpus, disk),
	// except timeout_ms, the default timeout of each exec, and output_bytes,
	// the output returned per exec and stream.
	Limits *Limits `json:"limits,omitempty"`
	// IdleTimeoutMs ends the session after that long without an exec or
	// file operation; 0 means the daemon's default.
	IdleTimeoutMs int64 `json:"idle_timeout_ms,omitempty"`
	// LifetimeMs ends the session that long after its creation, idle or
	// not; 0 means the daemon's max_lifetime, which it may not exceed.
	LifetimeMs int64             `json:"lifetime_ms,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Files      []File            `json:"files,omitempty"`
	// AllowedImports binds every exec of the session as
	// RunRequest.AllowedImports binds a run.
	AllowedImports []string `json:"allowed_imports"`
	// IdleAction is what the idle timeout does: "end" the session, or
	// "pause" it (it then lives until its lifetime ends); empty means the
	// daemon's [sessions] idle_action.
	IdleAction string `json:"idle_action,omitempty"`
	// LifetimeAction is what the end of the lifetime does: "end" (the
	// default) or "park" it (a Python session; an exec running then is
	// waited for), to be revived later with its whole lifetime again.
	LifetimeAction string `json:"lifetime_action,omitempty"`
	// Network is the session's egress policy, for its whole life (as
	// RunRequest.Network).
	Network *Network `json:"network,omitempty"`
	// Ports counts the connections made to the session's ports through
	// the daemon (/v1/sessions/{id}/ports/..., E2B's getHost), if any.
	Ports *PortStats `json:"ports,omitempty"`
	// Volumes and Datasets are mounted for the session's whole life, as
	// RunRequest's are for a run.
	Volumes  []VolumeMount `json:"volumes,omitempty"`
	Datasets []string      `json:"datasets,omitempty"`
	// Init makes the session's pid 1 a minimal init and its runner pid
	// 1's child, as RunRequest.Init does for a run.
	Init bool `json:"init,omitempty"`
	// Processes starts the sandbox's process agent with the session (a
	// Python session): it watches directories (GET .../watch) inside the
	// sandbox, as the sandbox's user.
	Processes bool `json:"processes,omitempty"`
}

// Session states.
const (
	SessionIdle   = "idle"
	SessionBusy   = "busy"
	SessionPaused = "paused" // frozen: memory kept, no CPU; resume or exec thaws it
	SessionDead   = "dead"
	SessionParked = "parked" // on disk, no sandbox: the next exec or POST .../revive revives it
)

// Session describes a session (the response of POST /v1/sessions and
// GET /v1/sessions/{id}).
type Session struct {
	ID       string `json:"id"`
	Rootfs   string `json:"rootfs"`
	Language string `json:"language"`
	State    string `json:"state"` // idle, busy, paused or dead
	// DeadStatus (oom, crashed, timeout, killed) and DeadReason say why a
	// dead session died.
	DeadStatus    string    `json:"dead_status,omitempty"`
	DeadReason    string    `json:"dead_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	LastUsedAt    time.Time `json:"last_used_at"`
	ExecCount     int       `json:"exec_count"`
	IdleTimeoutMs int64     `json:"idle_timeout_ms"`
	// ExpiresAt is when the session's lifetime ends, idle or not.
	ExpiresAt time.Time `json:"expires_at"`
	Limits    Limits    `json:"limits"`
	// AllowedImports is the session's import allowlist (null: none).
	AllowedImports []string `json:"allowed_imports"`
	IdleAction     string   `json:"idle_action"`
	LifetimeAction string   `json:"lifetime_action,omitempty"`
	// PausedAt is when a paused session was paused.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// ParkedAt is when a parked session was parked.
	ParkedAt *time.Time `json:"parked_at,omitempty"`
	// Pooled: the session took a runner from the warm pool.
	Pooled bool `json:"pooled,omitempty"`
	// Network is the session's egress policy, if it has one.
	Network *Network `json:"network,omitempty"`
	// Ports counts the connections made to the session's ports through
	// the daemon (/v1/sessions/{id}/ports/..., E2B's getHost), if any.
	Ports *PortStats `json:"ports,omitempty"`
	// OwnerUID is the uid that created the session (from the socket's peer
	// credentials); only it, root and the daemon's admin group see it.
	OwnerUID *uint32 `json:"owner_uid,omitempty"`
}

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	// Count is how many branches to make, 1 to MaxForkCount; absent: 1.
	Count *int `json:"count,omitempty"`
}

// MaxForkCount bounds ForkRequest.Count.
const MaxForkCount = 16

// NotCarried is a variable a fork or a revive left behind, and why: an
// open file, a socket, a thread, a generator, a live figure, a function
// defined in a cell on a rootfs without cloudpickle, or one that failed
// to load.
type NotCarried struct {
	Name string `json:"name"`
	// Context is the exec context the name lived in; empty: the default.
	Context string `json:"context,omitempty"`
	Reason  string `json:"reason"`
}

// CarriedSession is a session made from another's state (a fork's branch,
// a revived session) with what did not come along.
type CarriedSession struct {
	Session
	NotCarried []NotCarried `json:"not_carried"`
}

// ForkResult is the response of POST /v1/sessions/{id}/fork.
type ForkResult struct {
	Sessions []CarriedSession `json:"sessions"`
}

// SessionList is the response of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// ExecRequest is the body of POST /v1/sessions/{id}/exec. The answer is a
// RunResult (or, with Accept: application/x-ndjson, a stream of Events).
type ExecRequest struct {
	Code string `json:"code"`
	// Context names a Python namespace of the session's interpreter
	// (letters, digits, '-', '_', '.', at most 64): cells in different
	// contexts share files but not variables. Empty: the default one.
	Context string `json:"context,omitempty"`
	// Env holds environment variables for this exec only (os.environ and
	// what the cell starts); the session's own come back after it.
	Env map[string]string `json:"env,omitempty"`
	// TimeoutMs bounds this exec; 0 means the session's limits.timeout_ms.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}

// WorkspaceFile is one entry of GET /v1/sessions/{id}/files.
type WorkspaceFile struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mtime"`
	SHA256  string    `json:"sha256,omitempty"` // regular files
	Mime    string    `json:"mime,omitempty"`
	Dir     bool      `json:"dir,omitempty"`
	Symlink bool      `json:"symlink,omitempty"` // listed, never followed
	// SymlinkTarget is a symlink's target as written (where a listing
	// reads it), never followed.
	SymlinkTarget string `json:"symlink_target,omitempty"`
}

// FileList is the response of GET /v1/sessions/{id}/files.
type FileList struct {
	Files []WorkspaceFile `json:"files"`
	// FilesTruncated says Files stops at its cap (10,000 entries); the
	// response also carries the header X-Nsbox-Truncated: true.
	FilesTruncated bool `json:"files_truncated,omitempty"`
}
