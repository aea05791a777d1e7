package workspace

// FileInfo describes a file in /workspace created or changed by a run.
type FileInfo struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Mode    uint32 `json:"mode"`
	Content []byte `json:"content,omitempty"` // inline when it matched ReturnFiles
}

// MaxListed bounds a listing of the workspace (List, Changed, Collect):
// past it the list is cut, and says so.
const MaxListed = 10000

// MaxInlineBytes caps the total inline content of ReturnFiles in a Result.
const MaxInlineBytes = 8 << 20

// BytesPerInode sizes a sandbox tmpfs's inode count from its byte size
// (/workspace, /tmp and /dev/shm alike). An empty file, a directory or a
// symlink takes no bytes of a tmpfs, only an inode and a dentry: about
// 0.95 KiB of kernel memory, charged to the sandbox's memory cgroup, so the
// memory limit bounds them too. 262,144 for the default 256 MiB; at 4 KiB
// the default ran out at 65,535 files with bytes free.
const BytesPerInode = 1 << 10

// minInodes is the floor of a small tmpfs.
const minInodes = 8192

// Inodes is the inode count of a sandbox tmpfs of sizeBytes.
func Inodes(sizeBytes int64) int64 { return max(minInodes, sizeBytes/BytesPerInode) }
