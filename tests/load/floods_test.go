package load

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// An output flood on every path must be stopped by the output cap, not by
// its (long) timeout: the verdict is output_limit and the run ends long
// before the timeout (the table notes the slowest; the target is within
// 1 s of crossing the cap, which a flood crosses in milliseconds).
const (
	floodCap     = 1 << 20
	floodTimeout = 20 * time.Second
	pyFlood      = "import sys\nwhile True: sys.stdout.write('y' * 65536)"
)

func floodLimits(memory int64) *agentapi.Limits {
	return &agentapi.Limits{TimeoutMs: floodTimeout.Milliseconds(), OutputBytes: floodCap, MemoryBytes: memory}
}

// floodPath is one way into a sandbox; streamed is what a stream
// delivered (-1: not a stream).
type floodPath struct {
	name string
	do   func(ctx context.Context, cl *client.Client) (res *agentapi.RunResult, streamed int64, err error)
}

func runFlood(req *agentapi.RunRequest) func(context.Context, *client.Client) (*agentapi.RunResult, int64, error) {
	return func(ctx context.Context, cl *client.Client) (*agentapi.RunResult, int64, error) {
		res, err := cl.Run(ctx, req)
		return res, -1, err
	}
}

func streamFlood(req *agentapi.RunRequest) func(context.Context, *client.Client) (*agentapi.RunResult, int64, error) {
	return func(ctx context.Context, cl *client.Client) (*agentapi.RunResult, int64, error) {
		var n int64
		res, err := cl.RunStream(ctx, req, func(ev agentapi.Event) {
			if ev.Type == agentapi.EventStdout {
				n += int64(len(ev.Data) + len(ev.DataBase64)*3/4)
			}
		})
		return res, n, err
	}
}

// sessionFlood floods in a session's cell; then the session either
// answers its next cell or says it is dead.
func sessionFlood(rootfs string) func(context.Context, *client.Client) (*agentapi.RunResult, int64, error) {
	return func(ctx context.Context, cl *client.Client) (*agentapi.RunResult, int64, error) {
		s, err := cl.CreateSession(ctx, &agentapi.SessionRequest{Rootfs: rootfs, Limits: floodLimits(0)})
		if err != nil {
			return nil, 0, err
		}
		defer cl.DeleteSession(context.WithoutCancel(ctx), s.ID)
		res, err := cl.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: pyFlood})
		if err != nil {
			return nil, 0, err
		}
		next, err := cl.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "'after'"})
		if err == nil && !next.SessionDead && next.Value != "'after'" {
			return res, -1, fmt.Errorf("the cell after a flood answered %q (status %s, stdout %.80q)", next.Value, next.Status, next.Stdout)
		}
		if err != nil {
			if st, serr := cl.Session(ctx, s.ID); serr != nil || st.State != agentapi.SessionDead {
				return res, -1, fmt.Errorf("the cell after a flood failed (%v) on a session that is not dead", err)
			}
		}
		return res, -1, nil
	}
}

// flood runs one flood and checks its verdict.
func (sc *scenario) flood(p floodPath) {
	cl, closeIdle := sc.client()
	defer closeIdle()
	t0 := time.Now()
	res, streamed, err := p.do(context.Background(), cl)
	took := time.Since(t0)
	switch {
	case err != nil:
	case res.Status != agentapi.StatusOutputLimit:
		err = fmt.Errorf("%s flood: status %s (error %q), want %s", p.name, res.Status, res.Error, agentapi.StatusOutputLimit)
	case res.WallMs >= floodTimeout.Milliseconds()/2:
		err = fmt.Errorf("%s flood: ran %d ms of its %s timeout (stdout %d bytes): the cap did not stop it", p.name, res.WallMs, floodTimeout, res.StdoutBytes)
	case streamed > floodCap+64<<10:
		err = fmt.Errorf("%s flood: the stream delivered %d bytes past a %d-byte cap", p.name, streamed, floodCap)
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", p.name, err)
	}
	sc.record(took, err)
	if res != nil {
		flag := ""
		if res.WallMs > 1000 {
			flag = " (over 1 s)"
		}
		sc.row.note("%s %d ms%s", p.name, res.WallMs, flag)
	}
}

// floods: a Python flood pooled, cold, streamed and in a session, and the
// same flood from bash and argv, on the test rootfs. (The zygote path is
// in the zygote scenario.)
func (s *suite) floods(t *testing.T, sc *scenario) {
	sc.start("--max-concurrent", "2")
	py := func(memory int64) *agentapi.RunRequest {
		return &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: pyFlood, Limits: floodLimits(memory)}
	}
	for _, p := range []floodPath{
		{"pooled", runFlood(py(0))},
		{"cold", runFlood(py(300 << 20))},
		{"stream", streamFlood(py(0))},
		{"session", sessionFlood("")},
		{"bash", runFlood(&agentapi.RunRequest{Language: agentapi.LanguageBash, Code: "yes", Limits: floodLimits(0)})},
		{"argv", runFlood(&agentapi.RunRequest{Argv: []string{"sh", "-c", "yes"}, Limits: floodLimits(0)})},
	} {
		sc.flood(p)
	}
}
