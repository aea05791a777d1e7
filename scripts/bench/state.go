package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// The state part measures what keeps a session's state (docs/SESSIONS.md,
// docs/VOLUMES.md) through a private daemon on the data-science rootfs:
// fork into 1 and 8 branches, pause and resume, park and revive, of a
// session holding pandas and a 10 MB DataFrame, beside a plain session
// create on the same daemon; and a 64 MiB write into a named volume
// beside the same write into /workspace. Alternating rounds.

// stateFrame is the parent session's state: pandas and ~10 MB of DataFrame.
const stateFrame = "import pandas as pd, numpy as np\ndf = pd.DataFrame(np.random.rand(125_000, 10))\nint(df.memory_usage().sum())"

// writeCell writes 64 MiB to %q, fsyncs it, removes it and returns the
// milliseconds the write and fsync took, timed inside the sandbox.
const writeCell = `import os, time
_b = bytes(64 << 20)
_t = time.perf_counter()
with open(%q, "wb") as _f:
    _f.write(_b)
    _f.flush()
    os.fsync(_f.fileno())
os.remove(%q)
del _b
(time.perf_counter() - _t) * 1000`

// benchVolume is the bench's volume.
const benchVolume = "nsbox-bench"

func benchState(ctx context.Context, o Options, rep *report) error {
	rfs, err := rootfs.Store{Root: o.Store}.Lookup("default")
	if err != nil || !hasFile(rfs.Dir, "usr/lib/python3/dist-packages/pandas") {
		rep.Skipped = append(rep.Skipped, "state: no rootfs \"default\" with pandas (make rootfs-default)")
		return nil
	}
	if o.Socket != "" {
		rep.Skipped = append(rep.Skipped, "state: needs a private daemon (not --socket)")
		return nil
	}
	nsbox, err := o.nsbox()
	if err != nil {
		return err
	}
	before := measure.LoadAvg()
	defer func() { rep.StateLoad = before + " -> " + measure.LoadAvg() }()
	d, err := benchd.Start(nsbox, o.Store, "default", "", "--pool-node-size", "0")
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.WaitPools(ctx); err != nil {
		return err
	}
	cl := d.Client
	if _, err := cl.CreateVolume(ctx, &agentapi.VolumeRequest{Name: benchVolume, SizeBytes: 256 << 20}); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	limits := &agentapi.Limits{MemoryBytes: 2 << 30, DiskBytes: 256 << 20}
	parent, err := cl.CreateSession(ctx, &agentapi.SessionRequest{Limits: limits,
		Volumes: []agentapi.VolumeMount{{Name: benchVolume}}})
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	cleanup := context.WithoutCancel(ctx)
	defer cl.DeleteSession(cleanup, parent.ID)
	if res, err := cl.Exec(ctx, parent.ID, &agentapi.ExecRequest{Code: stateFrame}); err != nil || res.Status != agentapi.StatusOK {
		return fmt.Errorf("the DataFrame: %v %+v", err, res)
	}

	var create, fork1, fork8, pause, resume, park, revive, wsWrite, volWrite []time.Duration
	timed := func(into *[]time.Duration, f func() error) error {
		t0 := time.Now()
		err := f()
		*into = append(*into, time.Since(t0))
		return err
	}
	fork := func(into *[]time.Duration, n int) error {
		var out *agentapi.ForkResult
		err := timed(into, func() (err error) { out, err = cl.ForkSession(ctx, parent.ID, n); return err })
		if err != nil {
			return fmt.Errorf("fork %d: %w", n, err)
		}
		for _, b := range out.Sessions {
			if err := cl.DeleteSession(cleanup, b.ID); err != nil {
				return err
			}
		}
		return nil
	}
	write := func(into *[]time.Duration, path string) error {
		res, err := cl.Exec(ctx, parent.ID, &agentapi.ExecRequest{Code: fmt.Sprintf(writeCell, path, path)})
		if err != nil || res.Status != agentapi.StatusOK {
			return fmt.Errorf("write %s: %v %+v", path, err, res)
		}
		ms, err := strconv.ParseFloat(res.Value, 64)
		if err != nil {
			return fmt.Errorf("write %s: the cell answered %q", path, res.Value)
		}
		*into = append(*into, time.Duration(ms*float64(time.Millisecond)))
		return nil
	}
	for range max(3, o.Runs/4) {
		steps := []func() error{
			func() error {
				var s *agentapi.Session
				err := timed(&create, func() (err error) {
					s, err = cl.CreateSession(ctx, &agentapi.SessionRequest{Limits: limits})
					return err
				})
				if err != nil {
					return fmt.Errorf("create: %w", err)
				}
				return cl.DeleteSession(cleanup, s.ID)
			},
			func() error { return fork(&fork1, 1) },
			func() error { return fork(&fork8, 8) },
			func() error {
				if err := timed(&pause, func() error { _, err := cl.PauseSession(ctx, parent.ID); return err }); err != nil {
					return fmt.Errorf("pause: %w", err)
				}
				return timed(&resume, func() error { _, err := cl.ResumeSession(ctx, parent.ID); return err })
			},
			func() error {
				if err := timed(&park, func() error { _, err := cl.ParkSession(ctx, parent.ID); return err }); err != nil {
					return fmt.Errorf("park: %w", err)
				}
				return timed(&revive, func() error { _, err := cl.ReviveSession(ctx, parent.ID); return err })
			},
			func() error { return write(&wsWrite, "/workspace/bench.bin") },
			func() error { return write(&volWrite, "/mnt/"+benchVolume+"/bench.bin") },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
	}
	if err := cl.DeleteSession(cleanup, parent.ID); err != nil {
		return err
	}
	if err := cl.DeleteVolume(cleanup, benchVolume); err != nil {
		return fmt.Errorf("delete the bench volume: %w", err)
	}
	rep.State = append(rep.State,
		compare("session create (POST /v1/sessions)", create, "", nil, ""),
		compare("fork, 1 branch", fork1, "create", create, "<= 50 ms p50"),
		compare("fork, 8 branches", fork8, "create", create, "<= 200 ms p50"),
		compare("pause", pause, "", nil, "<= 5 ms p50"),
		compare("resume", resume, "", nil, "<= 5 ms p50"),
		compare("park", park, "", nil, ""),
		compare("revive", revive, "create", create, "<= 100 ms p50"),
		compare("write 64 MiB + fsync: /workspace (tmpfs)", wsWrite, "", nil, ""),
		compare("write 64 MiB + fsync: a volume (ext4 image)", volWrite, "/workspace", wsWrite, ""),
	)
	return nil
}
