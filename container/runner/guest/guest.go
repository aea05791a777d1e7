// Package guest runs a stateful interpreter of another language beside a
// sandbox's runner: a bash session or a Node.js runner, started by the
// sandbox's process agent (container/procs), so it shares the sandbox's
// files, namespaces, cgroup and lifetime output cap (procs.LimitOutput)
// and ends with it. Cells go in on the guest's stdin; their output comes
// back on its stdout and stderr, each ended by a per-cell marker, and the
// reply is one JSON line that follows the marker on stdout. A cell has
// the runner's limits and verdicts (runner.Status): its timeout and
// output cap interrupt it (SIGINT to the guest's process group), and one
// that does not stop runner.InterruptGrace later has the guest killed.
package guest

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// Kind is a guest's interpreter.
type Kind string

// The guests there are.
const (
	Bash       Kind = "bash"       // one bash process: variables, functions and cwd stay between cells
	JavaScript Kind = "javascript" // the Node runner (runner.NodeArgv); TypeScript cells too
	R          Kind = "r"          // one R session (Rscript): its global environment stays
	Java       Kind = "java"       // one JShell in one JVM: its snippets stay
)

// The R and Java guests' drivers (fieldsRequest is how they read a cell).
var (
	//go:embed r_driver.R
	rDriver string
	//go:embed NsboxJava.java
	javaDriver string
)

// javaStart writes the Java driver ($1) into a directory of its own and
// runs it from source; the driver removes the directory once the JVM has
// compiled it. The JVM is sized for a notebook: the serial collector and
// the first JIT tier start fastest.
const javaStart = `d=$(mktemp -d) && printf '%s' "$1" > "$d/NsboxJava.java" && ` +
	`exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto "$d/NsboxJava.java" "$d"`

// ErrNoBytes: a bash cell or a value holds a NUL byte, which bash cannot.
var ErrNoBytes = errors.New("a bash cell cannot hold a NUL byte")

// Options start a guest.
type Options struct {
	// Cwd is its working directory ("": the agent's default, /home/user).
	Cwd string
	// Env is added to the sandbox's environment for its whole life.
	Env map[string]string
	// Tag names its process in the agent's list.
	Tag string
}

// ExecRequest is one cell.
type ExecRequest struct {
	Code string
	// Timeout bounds the cell (0: none).
	Timeout time.Duration
	// OutputBytes caps the cell's output per stream (0: 1 MiB).
	OutputBytes int64
	// Env is set for this cell only.
	Env map[string]string
	// Transform (runner.StripTypes) goes to a JavaScript guest.
	Transform runner.Transform
	// Context names a JavaScript guest's vm context ("": the default).
	Context            string
	OnStdout, OnStderr func([]byte)
}

// Result is a cell's outcome: the runner's, and for bash the exit status
// of its last command (Status is runner.StatusException when it is not 0).
type Result struct {
	runner.Result
	ExitCode int
}

// Guest is a live guest interpreter. Exec calls are serialised.
type Guest struct {
	a    *procs.Agent
	p    *procs.Process
	kind Kind
	sem  chan struct{}

	ended chan struct{} // closed when the process's events end
	end   *procs.End    // set before ended is closed

	mu   sync.Mutex
	cur  *cell // the request whose output the reader passes on
	dead string
}

// Start starts a guest of kind through a, and returns once it is ready.
func Start(ctx context.Context, a *procs.Agent, kind Kind, o Options) (*Guest, error) {
	env := map[string]string{}
	for k, v := range o.Env {
		env[k] = v
	}
	var cfg procs.Config
	switch kind {
	case Bash:
		cfg = procs.Config{Cmd: "bash", Args: []string{"--noprofile", "--norc", "-c", bashDriver}}
	case JavaScript:
		argv := runner.NodeArgv()
		cfg = procs.Config{Cmd: argv[0], Args: argv[1:]}
	case R:
		cfg = procs.Config{Cmd: "Rscript", Args: []string{"--vanilla", "-e", rDriver}}
	case Java:
		cfg = procs.Config{Cmd: "/bin/sh", Args: []string{"-c", javaStart, "sh", javaDriver}}
	default:
		return nil, fmt.Errorf("guest %q: %w", kind, runner.ErrUnsupported)
	}
	g := &Guest{a: a, kind: kind, sem: make(chan struct{}, 1), ended: make(chan struct{})}
	ready := g.begin(newMarker(), nil, false)
	env["NSBOX_GUEST_MARKER"] = string(ready.marker)
	cfg.Env, cfg.Cwd, cfg.Stdin, cfg.Tag = env, o.Cwd, true, o.Tag
	p, err := a.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	g.p = p
	go g.read()
	select {
	case <-ready.done:
		g.settle()
		if ready.rep.Ready {
			return g, nil
		}
		err = fmt.Errorf("%w: no ready line", runner.ErrProtocol)
	case <-g.ended:
		err = fmt.Errorf("the %s guest exited before it was ready (%s)", kind, g.endStatus())
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.Close()
	return nil, err
}

// Kind is the guest's interpreter.
func (g *Guest) Kind() Kind { return g.kind }

// Dead says why the guest ended ("" while it lives).
func (g *Guest) Dead() string {
	select {
	case <-g.ended:
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.dead == "" {
			g.dead = fmt.Sprintf("the %s guest exited (%s)", g.kind, g.endStatus())
		}
		return g.dead
	default:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dead
}

func (g *Guest) endStatus() string {
	if g.end == nil {
		return "its process agent is gone"
	}
	return g.end.Status
}

// Close kills the guest's process group and waits for its end.
func (g *Guest) Close() {
	g.mu.Lock()
	if g.dead == "" {
		g.dead = "the guest was closed"
	}
	g.mu.Unlock()
	if g.p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = g.a.Signal(ctx, procs.Selector{Pid: g.p.Pid}, syscall.SIGKILL)
	select {
	case <-g.ended:
	case <-ctx.Done():
	}
}

// read passes the process's output to the current request until it ends.
func (g *Guest) read() {
	defer close(g.ended)
	for ev := range g.p.Events() {
		switch {
		case ev.Data != nil:
			g.mu.Lock()
			if c := g.cur; c != nil {
				if ev.Data.Stdout != nil {
					c.feed(0, ev.Data.Stdout)
				} else {
					c.feed(1, ev.Data.Stderr)
				}
			}
			g.mu.Unlock()
		case ev.End != nil:
			g.end = ev.End
		}
	}
}

// begin makes c the request whose output the reader passes on.
func (g *Guest) begin(marker string, req *ExecRequest, cellMarks bool) *cell {
	c := &cell{marker: []byte(marker), cellMarks: cellMarks, done: make(chan struct{}), over: make(chan struct{}), limit: 1 << 20}
	if req != nil {
		if req.OutputBytes > 0 {
			c.limit = req.OutputBytes
		}
		c.on = [2]func([]byte){req.OnStdout, req.OnStderr}
	}
	g.mu.Lock()
	g.cur = c
	g.mu.Unlock()
	return c
}

// settle stops passing output on (what a cell left running writes after
// its end is dropped).
func (g *Guest) settle() {
	g.mu.Lock()
	g.cur = nil
	g.mu.Unlock()
}

func newMarker() string {
	var m [16]byte
	_, _ = rand.Read(m[:])
	return "\x1b]nsbox-guest-" + hex.EncodeToString(m[:]) + "\x07"
}

// heldBack is how many bytes at b's end could begin marker: they wait for
// the next read before they are passed on.
func heldBack(b, marker []byte) int {
	for k := min(len(marker)-1, len(b)); k > 0; k-- {
		if bytes.HasSuffix(b, marker[:k]) {
			return k
		}
	}
	return 0
}
