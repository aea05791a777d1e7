package agentapi

// Built-in security profile names. A run selects one with RunRequest.Profile.
const (
	ProfileStrict     = "strict"
	ProfileStandard   = "standard"
	ProfilePermissive = "permissive"
)

// Profile is a named set of limits a run selects with RunRequest.Profile.
// Limits set in the request override the profile's; zero fields of a
// profile take the daemon's defaults. Every profile runs with the same
// isolation (namespaces, seccomp, read-only rootfs, loopback-only network);
// profiles differ in resources.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Limits      Limits `json:"limits"`
	// Network is the profile's egress policy, used by a request that
	// selects the profile and gives no network of its own.
	Network *Network `json:"network,omitempty"`
}

// BuiltinProfiles returns the profiles a daemon has unless its configuration
// redefines them: strict (tight limits, for code nobody has read), standard
// (the daemon's defaults) and permissive (larger limits, still no host
// access and no network).
func BuiltinProfiles() []Profile {
	return []Profile{
		{
			Name:        ProfileStrict,
			Description: "no network, tight limits: 256 MiB, 32 pids, 0.5 CPU, 10 s, 64 MiB disk, 256 KiB output",
			Limits: Limits{TimeoutMs: 10_000, MemoryBytes: 256 << 20, Pids: 32, CPUs: 0.5,
				DiskBytes: 64 << 20, OutputBytes: 256 << 10},
		},
		{
			Name:        ProfileStandard,
			Description: "no network, the daemon's default limits",
		},
		{
			Name:        ProfilePermissive,
			Description: "no network, larger limits: 2 GiB, 256 pids, 2 CPUs, 5 min, 1 GiB disk, 16 MiB output",
			Limits: Limits{TimeoutMs: 300_000, MemoryBytes: 2 << 30, Pids: 256, CPUs: 2,
				DiskBytes: 1 << 30, OutputBytes: 16 << 20},
		},
	}
}
