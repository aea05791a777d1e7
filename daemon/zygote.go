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
		out = append(out, agentapi.ZygoteInfo{
			Rootfs: st.Rootfs, Lean: st.Lean, State: st.State, Pid: st.Pid, Modules: st.Modules, Skipped: st.Skipped,
			Live: st.Live, Forks: st.Forks, Fallbacks: st.Fallbacks, Restarts: st.Restarts, LastError: st.LastError,
		})
	}
	return out
}
