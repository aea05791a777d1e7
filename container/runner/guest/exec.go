package guest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// bashDriver is the bash session: it reads each cell from fd 3 (the
// guest's stdin; the cell's own stdin is /dev/null) as three NUL-ended
// fields, marker, environment and code, and evals the code in the shell
// itself, so that its variables, functions and cwd stay. The environment
// is assignments placed before that eval: bash (not in POSIX mode) sets
// and exports them for it alone. SIGINT (a cell's timeout) ends the
// cell's foreground command, not the session.
const bashDriver = `exec 3<&0 0</dev/null
__nsbox_m=$NSBOX_GUEST_MARKER; unset NSBOX_GUEST_MARKER
trap : INT
printf '%s{"ready":true}\n' "$__nsbox_m"
while IFS= read -r -d '' -u 3 __nsbox_m && IFS= read -r -d '' -u 3 __nsbox_e && IFS= read -r -d '' -u 3 __nsbox_c; do
  eval "$__nsbox_e eval \"\$__nsbox_c\""
  __nsbox_r=$?
  printf '%s' "$__nsbox_m" >&2
  printf '%s{"exit_code":%d}\n' "$__nsbox_m" "$__nsbox_r"
done`

// envName is what a bash cell's environment names may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// bashRequest is a bash cell as the driver reads it.
func bashRequest(marker string, req *ExecRequest) ([]byte, error) {
	var env strings.Builder
	for k, v := range req.Env {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("environment variable %q: a bash name is letters, digits and _: %w", k, runner.ErrUnsupported)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, ErrNoBytes
		}
		env.WriteString(k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "' ")
	}
	if strings.IndexByte(req.Code, 0) >= 0 {
		return nil, ErrNoBytes
	}
	return []byte(marker + "\x00" + env.String() + "\x00" + req.Code + "\x00"), nil
}

// fieldsRequest is an R or Java cell as its driver reads it: fields, each
// a 10-digit byte count and the bytes: the marker, the number of
// environment variables, each name and value, the code. R's strings
// cannot hold a NUL byte.
func fieldsRequest(kind Kind, marker string, req *ExecRequest) ([]byte, error) {
	var b bytes.Buffer
	field := func(s string) error {
		if kind == R && strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("an R cell or variable cannot hold a NUL byte: %w", runner.ErrUnsupported)
		}
		if len(s) > 9_999_999_999 {
			return fmt.Errorf("a cell of %d bytes: %w", len(s), runner.ErrUnsupported)
		}
		fmt.Fprintf(&b, "%010d%s", len(s), s)
		return nil
	}
	names := make([]string, 0, len(req.Env))
	for k := range req.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	fields := []string{marker, strconv.Itoa(len(names))}
	for _, k := range names {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("environment variable %q: %w", k, runner.ErrUnsupported)
		}
		fields = append(fields, k, req.Env[k])
	}
	for _, f := range append(fields, req.Code) {
		if err := field(f); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

type nodeCell struct {
	Code    string            `json:"code"`
	Marker  string            `json:"marker"`
	Stream  bool              `json:"stream"`
	Context string            `json:"context,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Lang    string            `json:"lang,omitempty"`
}

type nodeDrop struct {
	Drop   string `json:"drop_context"`
	Marker string `json:"marker"`
}

// frame is one request of the Node runner's protocol: a 4-byte
// big-endian length, then JSON.
func frame(v any) []byte {
	b, _ := json.Marshal(v)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// Exec runs one cell. The error is non-nil only when it could not run
// (the guest is dead: runner.ErrDead; a request bash cannot hold; ctx
// ended while an earlier cell ran); the cell's own failures are statuses.
func (g *Guest) Exec(ctx context.Context, req ExecRequest) (*Result, error) {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-g.sem }()
	if why := g.Dead(); why != "" {
		return nil, fmt.Errorf("%w: %s", runner.ErrDead, why)
	}
	marker := newMarker()
	var in []byte
	switch g.kind {
	case JavaScript:
		in = frame(nodeCell{Code: req.Code, Marker: marker, Stream: true, Context: req.Context, Env: req.Env, Lang: string(req.Transform)})
	default:
		if req.Transform != "" || req.Context != "" {
			return nil, fmt.Errorf("a %s guest has no transforms or contexts: %w", g.kind, runner.ErrUnsupported)
		}
		var err error
		if g.kind == Bash {
			in, err = bashRequest(marker, &req)
		} else {
			in, err = fieldsRequest(g.kind, marker, &req)
		}
		if err != nil {
			return nil, err
		}
	}
	start := time.Now()
	c := g.begin(marker, &req, true)
	defer g.settle()
	res := &Result{}
	if err := g.a.SendInput(ctx, procs.Selector{Pid: g.p.Pid}, in); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return g.gone(c, res, start), nil
	}
	var timeout, grace <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	done, over := ctx.Done(), (<-chan struct{})(c.over)
	interrupt := func(st runner.Status, d time.Duration) {
		res.Status = st
		sctx, cancel := context.WithTimeout(context.Background(), d)
		_ = g.a.Signal(sctx, procs.Selector{Pid: g.p.Pid}, syscall.SIGINT)
		cancel()
		grace = time.After(d)
		timeout, done, over = nil, nil, nil
	}
	for {
		select {
		case <-c.done:
			g.finish(c, res, start)
			return res, nil
		case <-g.ended:
			return g.gone(c, res, start), nil
		case <-timeout:
			interrupt(runner.StatusTimeout, runner.InterruptGrace)
		case <-done:
			interrupt(runner.StatusCancelled, runner.InterruptGrace)
		case <-over:
			interrupt(runner.StatusOutputLimit, runner.OverflowGrace)
		case <-grace:
			why := fmt.Sprintf("the cell did not stop after its interrupt; the %s guest was killed", g.kind)
			g.mu.Lock()
			g.dead = why
			g.mu.Unlock()
			g.Close()
			g.output(c, res, start)
			res.Killed, res.Error = true, why
			return res, nil
		}
	}
}

// finish completes res from a cell that answered.
func (g *Guest) finish(c *cell, res *Result, start time.Time) {
	g.output(c, res, start)
	rep := &c.rep
	if c.bad {
		rep = &reply{Error: "the guest's reply was not JSON"}
	}
	res.Count, res.Exception = rep.Count, rep.Exception
	if rep.Value != nil {
		res.Value = *rep.Value
	}
	if rep.ExitCode != nil {
		res.ExitCode = *rep.ExitCode
	}
	switch {
	case res.Status != "": // interrupted in time
	case res.StdoutTruncated || res.StderrTruncated:
		res.Status = runner.StatusOutputLimit
	case rep.Error != "":
		res.Status, res.Error = runner.StatusCrashed, rep.Error
	case rep.Exception != nil || res.ExitCode != 0:
		res.Status = runner.StatusException
	default:
		res.Status = runner.StatusOK
	}
}

// gone completes res for a cell whose guest ended under it.
func (g *Guest) gone(c *cell, res *Result, start time.Time) *Result {
	g.output(c, res, start)
	why := g.Dead()
	switch {
	case g.end != nil && g.end.Status == procs.StatusOutputLimit:
		res.Status = runner.StatusOutputLimit
	case res.Status == "":
		res.Status = runner.StatusCrashed
	}
	res.Killed = res.Status != runner.StatusCrashed
	res.Error = why
	if g.end != nil && g.end.Exited {
		res.ExitCode = int(g.end.ExitCode)
	}
	return res
}

// output moves the cell's output into res; the reader passes no more on.
func (g *Guest) output(c *cell, res *Result, start time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cur = nil
	for i := range 2 {
		c.emit(i, c.pend[i])
		c.pend[i] = nil
	}
	res.Stdout, res.Stderr = c.out[0].Bytes(), c.out[1].Bytes()
	res.StdoutBytes, res.StderrBytes = c.n[0], c.n[1]
	res.StdoutTruncated, res.StderrTruncated = c.truncated[0], c.truncated[1]
	res.Wall = time.Since(start)
}

// DropContext forgets a JavaScript guest's context ("": empties the
// default one); a bash guest has none.
func (g *Guest) DropContext(ctx context.Context, name string) error {
	if g.kind != JavaScript {
		return fmt.Errorf("a %s guest has no contexts: %w", g.kind, runner.ErrUnsupported)
	}
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.sem }()
	if why := g.Dead(); why != "" {
		return fmt.Errorf("%w: %s", runner.ErrDead, why)
	}
	marker := newMarker()
	c := g.begin(marker, nil, false)
	defer g.settle()
	if err := g.a.SendInput(ctx, procs.Selector{Pid: g.p.Pid}, frame(nodeDrop{Drop: name, Marker: marker})); err != nil {
		return fmt.Errorf("%w: %v", runner.ErrDead, err)
	}
	select {
	case <-c.done:
		if c.rep.Error != "" {
			return fmt.Errorf("drop context %s: %s", strconv.Quote(name), c.rep.Error)
		}
		return nil
	case <-g.ended:
		return fmt.Errorf("%w: %s", runner.ErrDead, g.Dead())
	case <-ctx.Done():
		return ctx.Err()
	}
}
