package agentapi

// The lines of GET /v1/sessions/{id}/watch, in order: one "start", then
// a line per change (create, write, remove, rename, chmod), an "overflow"
// where changes were lost, and last "end" (the directory went) or
// "error" (the session ended).
const (
	WatchStart    = "start"
	WatchCreate   = "create"
	WatchWrite    = "write"
	WatchRemove   = "remove"
	WatchRename   = "rename"
	WatchChmod    = "chmod"
	WatchOverflow = "overflow"
	WatchEnd      = "end"
	WatchError    = "error"
)

// WatchEvent is one line of a watch's application/x-ndjson stream.
type WatchEvent struct {
	Type string `json:"type"`
	// Name is a change's path relative to the watched directory ("."
	// the directory itself).
	Name string `json:"name,omitempty"`
	// Path is the watched directory, as the sandbox names it ("start").
	Path  string `json:"path,omitempty"`
	Error *Error `json:"error,omitempty"` // "error"
}
