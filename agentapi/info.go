package agentapi

// Health is the response of GET /v1/health.
type Health struct {
	Status     string `json:"status"` // "ok"
	APIVersion string `json:"api_version"`
}

// Info is the response of GET /v1/info.
type Info struct {
	APIVersion    string   `json:"api_version"`
	Version       string   `json:"version"`
	CgroupMode    string   `json:"cgroup_mode"` // "v2", "v1" or "hybrid"
	Rootfs        []string `json:"rootfs"`
	DefaultRootfs string   `json:"default_rootfs"`
	DefaultLimits Limits   `json:"default_limits"`
	MaxLimits     Limits   `json:"max_limits"`
	MaxConcurrent int      `json:"max_concurrent"`
	QueueSize     int      `json:"queue_size"`
	InFlight      int      `json:"in_flight"`
	Queued        int      `json:"queued"`

	// Profiles are the security profiles a run may select, their limits
	// resolved over the daemon's defaults.
	Profiles []Profile `json:"profiles"`
}
