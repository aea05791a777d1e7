// Package initproc is the engine's side of a sandbox init (package
// sandboxinit): it clones the init into fresh namespaces with its pipes and
// sockets, hands it its config and workspace, places it in its cgroup and
// tells it to go on. Spares keeps inits cloned ahead of time, and Seal makes
// the sealed copy of the init binary they are exec'd from.
package initproc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/cleanup"
	"github.com/nsbox/nsbox/container/internal/frame"
	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/sandboxinit"
)

// Options say how to make one init.
type Options struct {
	Name    string // cgroup and liveness-lock name
	Limits  cgroup.Limits
	Cgroups *cgroup.Manager
	Self    *os.File // the sealed init binary (Seal)
	// UIDs gives the init a uid slot of its own, unless Block is set: then
	// the init is a zygote's, which maps root to the block's first id and
	// the zygote's child ids (locks.ZygoteChildIDs...) to the rest of it.
	UIDs  *locks.Allocator
	Block *locks.Block
	// LiveDir holds the engine's liveness locks.
	LiveDir string
	// Spawner, on v1, clones init in its cgroup, so it needs no Place.
	Spawner *Spawner
}

// Proc is a sandbox init: cloned into fresh namespaces, with its uid slot,
// liveness lock and cgroup, waiting for its run's config. A cold run makes
// one on demand; a spare is made ahead of time, which takes the clone and
// the cgroup's creation off the run's critical path. A Proc serves exactly
// one run.
type Proc struct {
	Name    string
	Owner   int // host uid/gid of the sandbox user (owns /workspace)
	Cg      *cgroup.Cgroup
	Limits  cgroup.Limits
	Process *os.Process
	Zygote  bool // made with Options.Block

	// The engine's ends of the command's stdio and of its control socket
	// (fd 3 of the command). Whoever takes one sets the field to nil.
	Stdout, Stderr, Stdin, Control *os.File

	slot   *locks.Slot
	live   *locks.Live
	placed bool
	cfg    *os.File // engine end of the config socket (fd 3 of init)
	syncW  *os.File // one byte: "you are in your cgroup, go on"
	errR   *os.File // init's setup error; EOF without data = exec'd

	waitOnce    sync.Once
	state       *os.ProcessState
	destroyOnce sync.Once
}

// Start allocates a uid slot (or uses the zygote's block), a liveness lock
// and a cgroup, and clones init into fresh namespaces. Init starts in its
// cgroup: on v2 through CLONE_INTO_CGROUP, on v1 cloned by o.Spawner. Only
// without either (the spawner's thread is gone) must it still be placed.
func Start(o Options) (_ *Proc, err error) {
	p := &Proc{Name: o.Name, Limits: o.Limits, Zygote: o.Block != nil}
	cu := cleanup.Make(p.Destroy)
	defer cu.Clean()
	var uids []syscall.SysProcIDMap
	if b := o.Block; b != nil {
		p.Owner = b.RootID()
		uids = []syscall.SysProcIDMap{
			{ContainerID: 0, HostID: b.RootID(), Size: 1},
			{ContainerID: locks.ZygoteChildIDs, HostID: b.ChildID(0), Size: locks.MaxZygoteChildren},
		}
	} else {
		if p.slot, err = o.UIDs.Acquire(); err != nil {
			return nil, err
		}
		p.Owner = p.slot.UserID()
		uids = []syscall.SysProcIDMap{
			{ContainerID: 0, HostID: p.slot.RootID(), Size: 1},
			{ContainerID: locks.SandboxUID, HostID: p.slot.UserID(), Size: 1},
		}
	}
	if p.live, err = locks.AcquireLive(o.LiveDir, o.Name); err != nil {
		return nil, err
	}
	if p.Cg, err = o.Cgroups.Create(o.Name, o.Limits); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}

	// The child's ends are closed once it has them, whatever happens.
	var theirs cleanup.Cleanup
	defer theirs.Clean()
	pipe := func(ours **os.File, oursRead bool) (*os.File, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		if oursRead {
			*ours = r
			theirs.Add(func() { w.Close() })
			return w, nil
		}
		*ours = w
		theirs.Add(func() { r.Close() })
		return r, nil
	}
	socketpair := func(ours **os.File) (*os.File, error) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		child := os.NewFile(uintptr(fds[1]), "sock-child")
		*ours = os.NewFile(uintptr(fds[0]), "sock")
		theirs.Add(func() { child.Close() })
		return child, nil
	}
	cfgChild, err := socketpair(&p.cfg)
	if err != nil {
		return nil, fmt.Errorf("config socket: %w", err)
	}
	syncR, err := pipe(&p.syncW, false)
	if err != nil {
		return nil, err
	}
	errW, err := pipe(&p.errR, true)
	if err != nil {
		return nil, err
	}
	outW, err := pipe(&p.Stdout, true)
	if err != nil {
		return nil, err
	}
	errOutW, err := pipe(&p.Stderr, true)
	if err != nil {
		return nil, err
	}
	inR, err := pipe(&p.Stdin, false)
	if err != nil {
		return nil, err
	}
	controlChild, err := socketpair(&p.Control)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}

	cmd := &exec.Cmd{
		// The sealed binary is handed over as an extra file too: the path
		// is resolved in the child after its fds 3.. have been replaced, so
		// the engine's own fd number of it could name another file there.
		Path:       fmt.Sprintf("/proc/self/fd/%d", sandboxinit.FDSelf),
		Args:       []string{sandboxinit.Arg0},
		Env:        []string{sandboxinit.Env},
		Stdin:      inR,
		Stdout:     outW,
		Stderr:     errOutW,
		ExtraFiles: []*os.File{cfgChild, syncR, errW, controlChild, o.Self},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
				syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			// Sandbox uid and gid have the same host id.
			UidMappings:                uids,
			GidMappings:                uids,
			GidMappingsEnableSetgroups: true,
			Credential:                 &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
			Setsid:                     true,
			Pdeathsig:                  syscall.SIGKILL,
		},
	}
	if fd := p.Cg.CloneFD(); fd >= 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWCGROUP
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
		p.placed = true
	}
	start := func() (err error) {
		p.Process, err = startProcess(cmd)
		return err
	}
	err = errSpawnerClosed
	if !p.placed && o.Spawner != nil {
		err = o.Spawner.Spawn(p.Cg, start)
		p.placed = err == nil
	}
	if errors.Is(err, errSpawnerClosed) {
		err = start()
	}
	if err != nil {
		return nil, fmt.Errorf("spawn sandbox init: %w", err)
	}
	cu.Release()
	return p, nil
}

// Place moves init into its cgroup (v1 without a spawner); a no-op when it
// started there. After an idle spell the move waits for an RCU grace
// period (~10 ms), which is why the spawner exists.
func (p *Proc) Place() error {
	if p.placed {
		return nil
	}
	if err := p.Cg.Add(p.Process.Pid); err != nil {
		return fmt.Errorf("place sandbox in its cgroup: %w", err)
	}
	p.placed = true
	return nil
}

// Send hands init its config and its mounts: the workspace, then the
// config's Mounts in order.
func (p *Proc) Send(cfg []byte, mounts ...*os.File) error {
	if err := frame.SendFiles(p.cfg, cfg, mounts...); err != nil {
		return fmt.Errorf("send init config: %w", err)
	}
	return unix.Shutdown(int(p.cfg.Fd()), unix.SHUT_WR)
}

// Go tells a placed init to go on: build the sandbox and exec the command.
func (p *Proc) Go() error {
	_, err := p.syncW.Write([]byte{1})
	return err
}

// SetupError waits for init to exec the command (EOF on its error pipe)
// and returns the message it left instead, if any.
func (p *Proc) SetupError() string {
	msg, _ := io.ReadAll(p.errR)
	return string(bytes.TrimSpace(msg))
}

// Failed kills a failed init and explains its failure by its own error
// message when it left one, else by err.
func (p *Proc) Failed(err error) error {
	p.Cg.Kill()
	p.Wait()
	if msg := p.SetupError(); msg != "" {
		return fmt.Errorf("sandbox init: %s", msg)
	}
	return err
}

// Wait waits for init (or the command it became) to exit, reaps it, and
// returns its state; nil if it could not be waited for. Later calls return
// the same.
func (p *Proc) Wait() *os.ProcessState {
	p.waitOnce.Do(func() { p.state, _ = p.Process.Wait() })
	return p.state
}

// Destroy kills and reaps init, removes the cgroup and releases the lock
// and uid slot. Safe on a half-built Proc and more than once.
func (p *Proc) Destroy() {
	p.destroyOnce.Do(func() {
		if p.Cg != nil {
			p.Cg.Kill()
		}
		if p.Process != nil {
			p.Wait()
		}
		kept := p.Cg != nil && p.Cg.Delete() != nil
		for _, f := range []*os.File{p.cfg, p.syncW, p.errR, p.Stdout, p.Stderr, p.Stdin, p.Control} {
			if f != nil {
				f.Close()
			}
		}
		if kept {
			p.live.Drop() // the next engine's Recover removes the cgroup
		} else {
			p.live.Release()
		}
		if p.slot != nil {
			p.slot.Release()
		}
	})
}
