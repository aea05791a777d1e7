package daemon

import (
	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/zygote"
)

// Zygotes reports the zygotes; *zygote.Set implements it.
type Zygotes interface {
	Stats() []zygote.Stats
}

// zygoteInfo describes the zygotes for /v1/info.
func (d *Daemon) zygoteInfo() []agentapi.ZygoteInfo {
	out := []agentapi.ZygoteInfo{}
	if d.cfg.Zygotes == nil {
		return out
	}
	for _, st := range d.cfg.Zygotes.Stats() {
		zi := agentapi.ZygoteInfo{
			Rootfs: st.Rootfs, Lean: st.Lean, State: st.State, Pid: st.Pid, Modules: st.Modules, Skipped: st.Skipped,
			Live: st.Live, Children: st.Children, Forks: st.Forks, Fallbacks: st.Fallbacks, Full: st.Full,
			Restarts: st.Restarts, LastError: st.LastError, LastFallback: st.LastFallback,
		}
		if !st.LastFallbackAt.IsZero() {
			zi.LastFallbackAt = new(st.LastFallbackAt.UTC())
		}
		out = append(out, zi)
	}
	return out
}
