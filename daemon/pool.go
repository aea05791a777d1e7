package daemon

import (
	"github.com/nsbox/nsbox/agentapi/limits"
	"strings"
	"time"

	"github.com/nsbox/nsbox/daemon/lang"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
)

// Pool hands out Python runners started ahead of time; *pool.Pool
// implements it.
type Pool interface {
	Take(key pool.Key) *pool.Taken
	Stats() []pool.Stats
	Unmatched() uint64
}

// takePooled takes a warm runner for a Python run, or returns nil.
func (d *Daemon) takePooled(rootfs string, spec container.Spec, kind runner.Language) *pool.Taken {
	if d.cfg.Pool == nil {
		return nil
	}
	return d.cfg.Pool.Take(pool.Key{Rootfs: rootfs, RootfsDir: spec.RootfsDir, Limits: spec.Limits, Env: spec.Env, Stdin: spec.Stdin != nil, Language: kind})
}

// takeForSession is session.Config.Take.
func (d *Daemon) takeForSession(opts session.Options) *runner.Runner {
	if d.cfg.Pool == nil {
		return nil
	}
	tk := d.cfg.Pool.Take(pool.Key{Rootfs: opts.Rootfs, RootfsDir: opts.RootfsDir, Limits: opts.Limits, Env: opts.Env, Language: opts.Runner})
	if tk == nil {
		return nil
	}
	return tk.Detach() // the session holds the rootfs
}

// poolInfo describes the pools for /v1/info.
func (d *Daemon) poolInfo() []agentapi.PoolInfo {
	out := []agentapi.PoolInfo{}
	if d.cfg.Pool == nil {
		return out
	}
	for _, st := range d.cfg.Pool.Stats() {
		pi := agentapi.PoolInfo{
			Name: st.Name, Rootfs: st.Rootfs, Language: lang.OfRunner(st.Language).Name, Limits: limits.ToWire(st.Limits), Preimport: st.Preimport, Skipped: st.Skipped,
			Size: st.Size, Ready: st.Ready, Spawning: st.Spawning, Forked: st.Forked,
			Hits: st.Hits, Misses: st.Misses, Discarded: st.Discarded, Replaced: st.Replaced, Failures: st.Failures, LastError: st.LastError,
			Refills: st.Refills, LastRefillMs: ms(st.LastRefill),
		}
		pi.Limits.TimeoutMs, pi.Limits.OutputBytes = 0, 0
		if st.Refills > 0 {
			pi.MeanRefillMs = ms(st.RefillSum / time.Duration(st.Refills))
		}
		if len(st.Env) > 0 {
			pi.Env = map[string]string{}
			for _, kv := range st.Env {
				k, v, _ := strings.Cut(kv, "=")
				pi.Env[k] = v
			}
		}
		out = append(out, pi)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
