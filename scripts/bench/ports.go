package bench

import (
	"context"

	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/interactive"
	"github.com/nsbox/nsbox/scripts/bench/llcost"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// benchPorts is the ports part (package interactive) on a private daemon
// of --rootfs, or the one at --socket: --runs echoes and small requests
// on each side, and 5 responses of 100 MiB.
func benchPorts(ctx context.Context, o Options, rep *report) error {
	cl := &client.Client{Socket: o.Socket}
	if o.Socket == "" {
		nsbox, err := o.nsbox()
		if err != nil {
			return err
		}
		d, err := benchd.Start(nsbox, o.Store, o.Rootfs, "", "--pool-size", "0")
		if err != nil {
			return err
		}
		defer d.Close()
		cl = d.Client
	}
	before := measure.LoadAvg()
	defer func() { rep.PortsLoad = before + " -> " + measure.LoadAvg() }()
	var err error
	rep.Ports, err = interactive.Run(ctx, cl, interactive.Options{Echoes: o.Runs, Requests: o.Runs, Big: 100 << 20, BigRuns: 5})
	return err
}

// benchLandlock is the landlock part (package llcost): private daemons
// with and without Landlock on --rootfs, --daemon-runs rounds per path.
func benchLandlock(ctx context.Context, o Options, rep *report) (err error) {
	nsbox, err := o.nsbox()
	if o.Socket != "" {
		rep.Skipped = append(rep.Skipped, "landlock: it compares private daemons (--socket given)")
	} else if err == nil {
		rep.Landlock, rep.LandlockLoad, err = llcost.Run(ctx, llcost.Options{Nsbox: nsbox, Store: o.Store, Rootfs: o.Rootfs, Runs: o.DaemonRuns})
	}
	return err
}
