// Package zyproto is the engine's side of the zygote's wire protocol:
// zygote.py itself, the frames on the zygote's control socket (fork
// requests and replies) and the handshake on a child's run socket (hello
// with the kernel's credentials, placed, ready, go).
package zyproto

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/frame"
)

// Source is the zygote (Command runs it).
//
//go:embed zygote.py
var Source string

// bootstrap reads the zygote's JSON Config and its source from stdin (a NUL
// between them) and runs the source in a module of its own, with the
// Config as sys.argv[1]. They travel on stdin, not on the command line:
// the zygote's argv, which its children inherit, is what ps shows for each
// of them, and 30 KB of Python per line buried everything else.
const bootstrap = "import sys; c, s = sys.stdin.buffer.read().split(b'\\0', 1); sys.argv[1:] = [c.decode()]; " +
	"exec(compile(s, '<nsbox-zygote>', 'exec'), {'__name__': '_nsbox_zygote'})"

// Command is the zygote's command line for cfg, and what it reads on stdin.
func Command(cfg Config) (argv []string, stdin []byte, err error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	return []string{"python3", "-I", "-c", bootstrap}, slices.Concat(b, []byte{0}, []byte(Source)), nil
}

// ReadReady reads the zygote's first frame, sent once it has imported its
// modules: the modules it skipped, and the top-level modules it holds.
func ReadReady(r io.Reader) (*Reply, error) {
	var rep Reply
	if err := ReadFrame(r, &rep); err != nil {
		return nil, err
	}
	if !rep.Ready {
		return &rep, errors.New("no ready frame")
	}
	if rep.Threads != 1 {
		return &rep, fmt.Errorf("the zygote has %d threads after its imports; it must have one", rep.Threads)
	}
	return &rep, nil
}

// MaxFrame bounds a frame from the zygote.
const MaxFrame = 1 << 20

// Config is the zygote's own configuration (argv[1]).
type Config struct {
	Modules   []string `json:"modules"`
	Prelude   string   `json:"prelude"`
	HugePages bool     `json:"huge_pages"`
	Slots     int      `json:"slots"`
	UserID    int      `json:"user_id"`
	// Masked and ReadOnly are the engine's /proc masks and read-only
	// paths: every spare applies them to its fresh /proc before it is
	// taken, so they are off the request's path.
	Masked   []string `json:"masked"`
	ReadOnly []string `json:"read_only"`
	// Seccomp is the engine's default filter, decoded once in the
	// zygote; a Request without one of its own gets it.
	Seccomp []byte `json:"seccomp"` // base64 in JSON
}

// Request is a fork request: everything the child applies to itself,
// decided by the engine. It carries no run's code or data: those go to the
// child (Run) once it is verified.
type Request struct {
	Slot      int    `json:"slot"`
	Hostname  string `json:"hostname"`
	TmpBytes  int64  `json:"tmp_bytes"`
	TmpInodes int64  `json:"tmp_inodes"`
	NoFile    uint64 `json:"nofile"`
	FSize     uint64 `json:"fsize"`
	UID       int    `json:"uid"`
	GID       int    `json:"gid"`
	// Seccomp is the child's filter; nil: the zygote's (Config.Seccomp).
	Seccomp  []byte `json:"seccomp,omitempty"` // base64 in JSON
	CgroupNS bool   `json:"cgroupns"`
	Threads  int    `json:"threads"`
	Control  bool   `json:"control"`
	TestSkip string `json:"test_skip,omitempty"`
	// Mounts are the NAMEs to attach at /mnt/NAME, one per fd after the
	// workspace's in the request's SCM_RIGHTS.
	Mounts []string `json:"mounts,omitempty"`
	// Tasks is the number of fds at the end of the request's SCM_RIGHTS
	// that are the child's cgroup's tasks files (v1): it writes "0" to
	// each, placing itself before anything else, and closes them.
	Tasks int `json:"tasks,omitempty"`
	// Landlock is sandboxinit's mode (off, auto, required; "": auto):
	// the child applies the rules init does, after its mounts.
	Landlock string `json:"landlock,omitempty"`
}

// Reply is a frame from the zygote.
type Reply struct {
	Ready   bool     `json:"ready"`
	Skipped []string `json:"skipped"`
	Threads int      `json:"threads"`
	// Loaded are the top-level modules in the ready zygote's sys.modules,
	// Stdlib its sys.stdlib_module_names: what a child can import without
	// a search (routing by a cell's imports, zygote.Set).
	Loaded []string `json:"loaded"`
	Stdlib []string `json:"stdlib"`
	Forked *int     `json:"forked"`
	Error  string   `json:"error"`
	Exit   *int     `json:"exit"`
	Status int      `json:"status"`
}

// Run is what the verified child runs, sent to it directly.
type Run struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Held maps an argument's index to the name of the string constant of
	// the zygote's prelude that it equals: that argument is sent empty and
	// the child takes the prelude's copy (the runner's 26 KB source).
	Held map[int]string `json:"held,omitempty"`
}

// HoldArgs is run with each argument that is one of held (a prelude
// constant's value, to its name) sent as the name.
func HoldArgs(run Run, held map[string]string) Run {
	for i, a := range run.Argv {
		j, ok := held[a]
		if !ok {
			continue
		}
		if run.Held == nil {
			run.Argv, run.Held = slices.Clone(run.Argv), map[int]string{}
		}
		run.Argv[i], run.Held[i] = "", j
	}
	return run
}

// ReadFrame reads one frame of the zygote's into v.
func ReadFrame(r io.Reader, v any) error {
	b, err := frame.Read(r, MaxFrame)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Handshake is the engine's end of a child's run socket during its set-up.
type Handshake struct {
	Sock   *os.File // non-blocking, with SO_PASSCRED
	Stderr *os.File // the child's stderr, for error messages
	buf    []byte   // bytes read past the handshake's
}

// Hello reads the child's first byte and the host pid the kernel attached.
func (h *Handshake) Hello() (int, error) {
	rc, err := h.Sock.SyscallConn()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	var n, oobn int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, 0)
		return rerr != unix.EAGAIN
	}); err != nil {
		return 0, fmt.Errorf("wait for the child: %w", err)
	}
	if rerr != nil {
		return 0, fmt.Errorf("wait for the child: %w", rerr)
	}
	h.buf = append(h.buf, buf[:n]...)
	if err := h.Expect('H'); err != nil {
		return 0, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		return 0, fmt.Errorf("the child's hello carried no credentials (%v)", err)
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil {
		return 0, fmt.Errorf("the child's credentials: %w", err)
	}
	return int(cred.Pid), nil
}

// Placed tells the child it sits in its cgroup.
func (h *Handshake) Placed() error {
	if _, err := h.Sock.Write([]byte{'P'}); err != nil {
		return fmt.Errorf("placed: %w", err)
	}
	return nil
}

// Go sends the verified child its command.
func (h *Handshake) Go(run Run) error {
	msg, err := frame.Append([]byte{'G'}, run)
	if err != nil {
		return err
	}
	if _, err := h.Sock.Write(msg); err != nil {
		return fmt.Errorf("go: %w", err)
	}
	return nil
}

// Expect reads one byte and wants b; 'E' is followed by the child's own
// error message, up to EOF.
func (h *Handshake) Expect(b byte) error {
	if len(h.buf) == 0 {
		var one [1]byte
		n, err := h.Sock.Read(one[:])
		if n == 0 {
			return fmt.Errorf("the child ended during its set-up (%v)%s", err, h.errTail())
		}
		h.buf = append(h.buf, one[0])
	}
	got := h.buf[0]
	h.buf = h.buf[1:]
	switch got {
	case b:
		return nil
	case 'E':
		rest, _ := io.ReadAll(io.LimitReader(h.Sock, 4096))
		return fmt.Errorf("%s", bytes.TrimSpace(append(h.buf, rest...)))
	}
	return fmt.Errorf("the child said %q, want %q", got, b)
}

// errTail is what a dead child left on its stderr, for error messages.
func (h *Handshake) errTail() string {
	_ = h.Stderr.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	b, _ := io.ReadAll(io.LimitReader(h.Stderr, 4096))
	_ = h.Stderr.SetReadDeadline(time.Time{})
	if len(b) == 0 {
		return ""
	}
	return "; stderr: " + string(bytes.TrimSpace(b))
}
