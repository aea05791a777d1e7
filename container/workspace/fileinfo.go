package workspace

// FileInfo describes a file in /workspace created or changed by a run.
type FileInfo struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Mode    uint32 `json:"mode"`
	Content []byte `json:"content,omitempty"` // inline when it matched ReturnFiles
}

// MaxInlineBytes caps the total inline content of ReturnFiles in a Result.
const MaxInlineBytes = 8 << 20
