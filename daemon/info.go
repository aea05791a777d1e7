package daemon

import (
	"context"
	"fmt"
	"github.com/nsbox/nsbox/agentapi/limits"

	"github.com/nsbox/nsbox/agentapi"
)

// Info describes the daemon: its rootfs, policy, load, pools and zygotes,
// and the volumes ctx's caller may use.
func (d *Daemon) Info(ctx context.Context) (*agentapi.Info, error) {
	names, err := d.cfg.Rootfs.List()
	if err != nil {
		return nil, fmt.Errorf("listing rootfs: %w", err)
	}
	if names == nil {
		names = []string{}
	}
	pol := d.pol.Load()
	langs := make(map[string][]string, len(names))
	for _, n := range names {
		langs[n] = pol.Languages(n)
	}
	return &agentapi.Info{
		Languages:         langs,
		LanguageInfo:      pol.LanguageInfo(),
		APIVersion:        agentapi.Version,
		Version:           d.cfg.Version,
		CgroupMode:        d.cfg.CgroupMode,
		Rootfs:            names,
		DefaultRootfs:     pol.DefaultRootfs,
		DefaultLimits:     limits.ToWire(pol.Defaults),
		MaxLimits:         limits.ToWire(pol.Max),
		Profiles:          pol.Profiles(),
		MaxConcurrent:     d.cfg.MaxConcurrent,
		QueueSize:         d.cfg.QueueSize,
		ResultBudgetBytes: d.cfg.ResultBytes,
		InFlight:          d.adm.InFlight(),
		TearingDown:       int(d.tearing.Load()),
		Queued:            d.adm.Queued(),
		Pools:             d.poolInfo(),
		Zygotes:           d.zygoteInfo(),
		Network:           pol.Network.Wire(),
		Datasets:          d.datasetNames(),
		Volumes:           d.volumeNames(ctx),
		Landlock:          d.cfg.Landlock,
	}, nil
}
