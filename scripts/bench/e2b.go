package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// The E2B part measures what the E2B endpoint costs against the same work
// through /v1: a sandbox's creation and a cell's round trip, through the
// unmodified @e2b/code-interpreter SDK (tests/e2b-client/bench.mjs, timed
// in node) and through the Go client over the Unix socket, round after
// round on one private daemon, on the data-science rootfs "default"
// (sessions are zygote children there).
const (
	e2bCellsPerSandbox = 10
	e2bRoundSandboxes  = 5
)

// e2bRow is one line of the E2B table.
type e2bRow struct {
	System string  `json:"system"`
	Runs   int     `json:"runs"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	VsV1   float64 `json:"vs_v1_p50,omitempty"` // p50 over the /v1 row's
	Target string  `json:"target,omitempty"`
}

func benchE2B(ctx context.Context, o Options, rep *report) error {
	if o.Socket != "" {
		rep.Skipped = append(rep.Skipped, "e2b: needs a private daemon with an E2B listener (not --socket)")
		return nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		rep.Skipped = append(rep.Skipped, "e2b: no node on the host for the SDK (apt-get install nodejs)")
		return nil
	}
	dir, err := filepath.Abs(o.E2BClient)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@e2b", "code-interpreter")); err != nil {
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("e2b: the SDKs are not installed in %s (make deps, or --e2b-client DIR)", dir))
		return nil
	}
	if _, err := (rootfs.Store{Root: o.Store}).Lookup("default"); err != nil {
		rep.Skipped = append(rep.Skipped, "e2b: no data-science rootfs \"default\" (make rootfs-default)")
		return nil
	}
	nsbox, err := o.nsbox()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "nsbox-bench-e2b-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	key := "e2b_" + container.NewID() + container.NewID()
	keys := filepath.Join(tmp, "keys")
	if err := os.WriteFile(keys, []byte(key+"\n"), 0o600); err != nil {
		return err
	}
	addr, err := freeLoopback()
	if err != nil {
		return err
	}
	d, err := benchd.Start(nsbox, o.Store, "default", "", "--e2b-listen", addr, "--e2b-keys", keys)
	if err != nil {
		return err
	}
	defer d.Close()

	before := measure.LoadAvg()
	defer func() { rep.E2BLoad = before + " -> " + measure.LoadAvg() }()
	rounds := max(1, o.DaemonRuns/10) // 5 sandboxes and 50 cells a round and side
	var sdkCreate, sdkCell, v1Create, v1Cell []time.Duration
	for r := 0; r < rounds; r++ {
		if err := d.WaitPools(ctx); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, node, "bench.mjs", fmt.Sprint(e2bRoundSandboxes), fmt.Sprint(e2bCellsPerSandbox))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "E2B_API_URL=http://"+addr, "E2B_SANDBOX_URL=http://"+addr, "E2B_API_KEY="+key, "E2B_DEBUG=false")
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("node bench.mjs: %w (%s)", err, exitStderr(err))
		}
		var got struct {
			Create  []float64 `json:"create_ms"`
			RunCode []float64 `json:"run_code_ms"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			return fmt.Errorf("node bench.mjs printed %q: %w", out, err)
		}
		sdkCreate = append(sdkCreate, msDurations(got.Create)...)
		sdkCell = append(sdkCell, msDurations(got.RunCode)...)

		if err := d.WaitPools(ctx); err != nil {
			return err
		}
		for i := 0; i < e2bRoundSandboxes; i++ {
			t0 := time.Now()
			s, err := d.Client.CreateSession(ctx, &agentapi.SessionRequest{})
			if err != nil {
				return err
			}
			v1Create = append(v1Create, time.Since(t0))
			if _, err := d.Client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "x = 0"}); err != nil {
				return err
			}
			for j := 0; j < e2bCellsPerSandbox; j++ {
				t0 = time.Now()
				res, err := d.Client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "x += 1"})
				if err != nil {
					return err
				}
				v1Cell = append(v1Cell, time.Since(t0))
				if res.Status != agentapi.StatusOK {
					return fmt.Errorf("/v1 exec: %s %s", res.Status, res.Error)
				}
			}
			if err := d.Client.DeleteSession(ctx, s.ID); err != nil {
				return err
			}
		}
	}
	row := func(name string, s []time.Duration, base []time.Duration, target string) e2bRow {
		r := e2bRow{System: name, Runs: len(s), P50Ms: measure.PctMs(s, 0.5), P95Ms: measure.PctMs(s, 0.95), Target: target}
		if base != nil && measure.PctMs(base, 0.5) > 0 {
			r.VsV1 = r.P50Ms / measure.PctMs(base, 0.5)
		}
		return r
	}
	rep.E2B = append(rep.E2B,
		row("POST /v1/sessions (Go client, Unix socket)", v1Create, nil, ""),
		row("Sandbox.create() (E2B SDK, TCP)", sdkCreate, v1Create, "<= 20 ms"),
		row("session exec x += 1 (Go client, Unix socket)", v1Cell, nil, ""),
		row("runCode(\"x += 1\") (E2B SDK, TCP)", sdkCell, v1Cell, "<= 5 ms"),
	)
	return nil
}

// freeLoopback is a loopback address with a port free now.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func msDurations(v []float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, ms := range v {
		out[i] = time.Duration(ms * float64(time.Millisecond))
	}
	return out
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
