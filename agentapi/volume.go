package agentapi

// VolumeMount asks for a named volume in a run or session (RunRequest and
// SessionRequest "volumes").
type VolumeMount struct {
	// Name is the volume's (POST /v1/volumes made it).
	Name string `json:"name"`
	// Path is where the sandbox sees it: /mnt/NAME2 for a safe NAME2
	// (1-63 of a-z, 0-9, '.', '_', '-'); empty means /mnt/<name>.
	Path string `json:"path,omitempty"`
	// ReadOnly mounts it read-only: writes fail with EROFS inside.
	ReadOnly bool `json:"read_only,omitempty"`
}

// VolumeRequest is the body of POST /v1/volumes.
type VolumeRequest struct {
	// Name is 1-63 of a-z, 0-9, '.', '_' and '-', starting with a letter
	// or digit.
	Name string `json:"name"`
	// SizeBytes is the volume's cap, from 16 MiB to 1 TiB (rounded up to
	// 4 KiB): a write past it fails inside the sandbox with ENOSPC.
	SizeBytes int64 `json:"size_bytes"`
}

// Volume describes a named volume.
type Volume struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	// UsedBytes is what its filesystem uses (ext4's own metadata
	// included, so a new volume uses a little).
	UsedBytes int64 `json:"used_bytes"`
	// InUse counts the live sandboxes (runs and sessions) mounting it.
	InUse int `json:"in_use"`
	// OwnerUID is the uid that created it (from the socket's peer
	// credentials); only it, root and the daemon's admin group see and
	// use it. Absent on a volume made before volumes had owners.
	OwnerUID *uint32 `json:"owner_uid,omitempty"`
	// ReadOnly: the daemon mounted it read-only at start because the
	// host's disk could not reserve its image whole (an image made
	// sparse by a daemon from before reservations): its data reads,
	// writes fail with EROFS. Free space and restart the daemon.
	ReadOnly bool `json:"read_only,omitempty"`
}

// VolumeList is the body of GET /v1/volumes.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}
