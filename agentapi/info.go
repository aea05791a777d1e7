package agentapi

import "time"

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
	// TearingDown counts finished runs whose sandbox is still being torn
	// down after their answer, having freed their run slot (at most
	// max_concurrent).
	TearingDown int `json:"tearing_down"`
	// ResultBudgetBytes and BodyBudgetBytes are [budgets] results and
	// bodies: the run results, and the request bodies (with the E2B
	// endpoint's), held at once; BodyBudgetBytes is 0 from a core
	// without an HTTP server.
	ResultBudgetBytes int64 `json:"result_budget_bytes"`
	BodyBudgetBytes   int64 `json:"body_budget_bytes,omitempty"`

	// Profiles are the security profiles a run may select, their limits
	// resolved over the daemon's defaults.
	Profiles []Profile `json:"profiles"`

	// Pools are the warm pools of started Python runners, one per pool
	// profile (empty when the pool is off).
	Pools []PoolInfo `json:"pools"`

	// Zygotes are the pre-imported interpreters whose children serve
	// Python runs and sessions, one per rootfs (empty when off).
	Zygotes []ZygoteInfo `json:"zygotes"`

	// Languages are the run languages of each rootfs, from the daemon's
	// language registry: python and bash, javascript and typescript where
	// the rootfs has Node.js (and esbuild), and those the operator
	// declared ([languages.NAME]) for it.
	Languages map[string][]string `json:"languages"`

	// LanguageInfo describes every language of the daemon (those of
	// Languages' lists), in its registry's order: what each can do, for
	// clients that build their tools from it (nsbox mcp).
	LanguageInfo []LanguageInfo `json:"language_info"`

	// Network is what a run may ask for in its network policy: the
	// operator's allow list, the names of its secrets (never their values)
	// and its caps; absent when no run may have network.
	Network *Network `json:"network,omitempty"`

	// Datasets and Volumes name the read-only host datasets the operator
	// declared and the named volumes that exist.
	Datasets []string `json:"datasets"`
	Volumes  []string `json:"volumes"`

	// Landlock is the second layer under the namespaces: [security]
	// landlock (auto, required, off), the kernel's Landlock ABI version
	// (0: none) and whether sandboxes get it.
	Landlock Landlock `json:"landlock"`
}

// Landlock is Info's report of Landlock in sandboxes.
type Landlock struct {
	Mode   string `json:"mode"`
	ABI    int    `json:"abi"`
	Active bool   `json:"active"`
}

// LanguageInfo is one language of the daemon's registry: its names, what
// runs it and what it can do.
type LanguageInfo struct {
	Name    string   `json:"name"` // RunRequest.Language
	Aliases []string `json:"aliases,omitempty"`
	// Title is its name for people ("Python"); Description says in a
	// sentence what a call of it runs and returns, for tool docs.
	Title       string `json:"title"`
	Description string `json:"description"`
	// Default marks the language of a session (or run) that names none.
	Default bool `json:"default,omitempty"`
	// Runner is the kind of interpreter that runs its code as cells
	// (state kept across a session's calls, the last expression's value
	// returned); "" for none: its runs are one-shot programs. Languages of
	// one runner differ by Transform (typescript's "ts": types stripped),
	// and a session of one with a transform runs the plain one's code too.
	Runner    string `json:"runner,omitempty"`
	Transform string `json:"transform,omitempty"`
	// Sessions: a session may run it. ForkPark: its sessions fork and
	// park. AllowedImports: a run of it takes allowed_imports. Zygote:
	// its runs are forked from the rootfs's zygote, with the modules it
	// pre-imports (ZygoteInfo.Modules). OneShot: it runs without its
	// runner (a custom seccomp filter).
	Sessions       bool `json:"sessions"`
	ForkPark       bool `json:"fork_park"`
	AllowedImports bool `json:"allowed_imports"`
	Zygote         bool `json:"zygote"`
	OneShot        bool `json:"one_shot"`
}

// ZygoteInfo describes one zygote: Python runs and sessions on Rootfs are
// forked from it while its state is "ready".
type ZygoteInfo struct {
	Rootfs string `json:"rootfs"`
	// Lean marks the rootfs's second, smaller zygote ([zygote]
	// lean_modules): it takes the Python runs whose imports it holds.
	Lean bool `json:"lean,omitempty"`
	// State is starting, ready, restarting, unused (the rootfs has none of
	// the modules) or closed.
	State   string   `json:"state"`
	Pid     int      `json:"pid,omitempty"` // the zygote's host pid while ready
	Modules []string `json:"modules"`
	Skipped []string `json:"skipped,omitempty"` // modules the rootfs could not import

	Live      int    `json:"live"`               // children alive now
	Children  int    `json:"children,omitempty"` // the most alive at once ([zygote] children), while it runs
	Forks     uint64 `json:"forks"`              // runs and sessions served by a child
	Fallbacks uint64 `json:"fallbacks"`          // ones it could not take (started cold)
	// Full counts the fallbacks that found Children children alive.
	Full      uint64 `json:"full"`
	Restarts  uint64 `json:"restarts"`
	LastError string `json:"last_error,omitempty"`
	// LastFallback is why the last fallback happened, at LastFallbackAt.
	LastFallback   string     `json:"last_fallback,omitempty"`
	LastFallbackAt *time.Time `json:"last_fallback_at,omitempty"`
}

// PoolInfo describes one warm-pool profile: which runs it serves (Python
// runs and new sessions on Rootfs whose memory, pids, cpus and disk limits
// and env equal these) and its state.
type PoolInfo struct {
	Name      string            `json:"name"`
	Rootfs    string            `json:"rootfs"`
	Language  string            `json:"language"` // python, or javascript (Node runners, TypeScript included)
	Limits    Limits            `json:"limits"`   // timeout_ms and output_bytes are per run, not matched
	Env       map[string]string `json:"env,omitempty"`
	Preimport []string          `json:"preimport,omitempty"`
	// Skipped lists pre-imports the rootfs could not import.
	Skipped []string `json:"skipped,omitempty"`

	Size     int `json:"size"`     // runners kept ready
	Ready    int `json:"ready"`    // ready now
	Spawning int `json:"spawning"` // refills under way
	// Forked counts the ready runners forked from a zygote (with its
	// imports). Runners started while the zygote was down are replaced
	// once it is ready, so with a ready zygote it comes to equal ready.
	Forked int `json:"forked"`

	Hits      uint64 `json:"hits"`      // runs and sessions that took a ready runner
	Misses    uint64 `json:"misses"`    // matching ones that found none ready (started cold)
	Discarded uint64 `json:"discarded"` // runners that died while waiting (replaced)
	Replaced  uint64 `json:"replaced"`  // runners started cold, replaced once the zygote was ready
	Failures  uint64 `json:"failures"`  // refills that failed
	LastError string `json:"last_error,omitempty"`

	Refills      uint64  `json:"refills"`        // runners started for the pool
	LastRefillMs float64 `json:"last_refill_ms"` // the latest refill's time
	MeanRefillMs float64 `json:"mean_refill_ms"` // mean refill time
}
