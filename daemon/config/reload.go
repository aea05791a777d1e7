package config

import (
	"strconv"

	"github.com/nsbox/nsbox/daemon/policy"
)

// Policy is what a running daemon takes on reload (SIGHUP): the
// daemon core's policy.Policy (defaults, maxima, profiles, sessions).
type Policy = policy.Policy

// Policy is the part of cfg that applies live.
func (cfg Config) Policy() Policy {
	d, m := cfg.Limits()
	return Policy{DefaultRootfs: cfg.DefaultRootfs, DefaultLimits: d, MaxLimits: m, Profiles: cfg.Profiles, Sessions: cfg.Sessions, Network: cfg.Network.Network, Languages: cfg.Languages}
}

// RestartKeys names the settings that differ between cfg and next and only
// take effect at the next start.
func (cfg Config) RestartKeys(next Config) []string {
	a, b := cfg, next
	var keys []string
	for _, k := range []struct {
		key  string
		x, y any
	}{
		{"socket", a.Socket, b.Socket}, {"state_dir", a.StateDir, b.StateDir}, {"run_dir", a.RunDir, b.RunDir},
		{"rootfs_store", a.RootfsStore, b.RootfsStore}, {"cgroup_name", a.CgroupName, b.CgroupName},
		{"max_concurrent", a.MaxConcurrent, b.MaxConcurrent}, {"queue", queueString(a.Queue), queueString(b.Queue)},
		{"log_format", a.LogFormat, b.LogFormat}, {"metrics_listen", a.MetricsListen, b.MetricsListen},
		{"shutdown_grace", a.ShutdownGrace, b.ShutdownGrace}, {"pool", a.Pool.String(), b.Pool.String()},
		{"zygote", a.Zygote.String(), b.Zygote.String()}, {"network", a.Network.String(), b.Network.String()},
		{"e2b.listen", a.E2B.Listen, b.E2B.Listen}, {"e2b.keys_file", a.E2B.KeysFile, b.E2B.KeysFile},
		{"datasets", datasetsString(a.Datasets), datasetsString(b.Datasets)},
		{"security.landlock", a.Security.Landlock, b.Security.Landlock},
		{"volumes.owner_id", a.Volumes.OwnerID, b.Volumes.OwnerID},
		{"budgets", a.Budgets.String(), b.Budgets.String()}, {"e2b.key_requests", a.E2B.KeyRequests, b.E2B.KeyRequests},
	} {
		if k.x != k.y {
			keys = append(keys, k.key)
		}
	}
	return keys
}

func queueString(q *int) string {
	if q == nil {
		return "default"
	}
	return strconv.Itoa(*q)
}
