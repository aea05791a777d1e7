package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/sandboxinit"
)

// proc is a sandbox init: cloned into fresh namespaces, with its uid slot,
// liveness lock and cgroup, waiting for its run's config. A cold run makes
// one on demand; a spare is made ahead of time and already sits in its
// cgroup, which takes the v1 cgroup move (an RCU grace period, ~10 ms) and
// the clone off the run's critical path. A proc serves exactly one run.
type proc struct {
	name   string // cgroup and liveness-lock name
	slot   *uidSlot
	owner  int // host uid/gid of the sandbox user (owns /workspace)
	live   *os.File
	cg     *cgroup.Cgroup
	limits cgroup.Limits
	cmd    *exec.Cmd
	placed bool

	cfg     *os.File // engine end of the config socket (fd 3 of init)
	syncW   *os.File // one byte: "you are in your cgroup, go on"
	errR    *os.File // init's setup error; EOF without data = exec'd
	outR    *os.File
	errOutR *os.File
	inW     *os.File
	control *os.File // engine end of the control socket (fd 3 of the command)

	destroyOnce sync.Once
}

// newProc allocates a uid slot, a liveness lock and a cgroup with limits l,
// and clones init into fresh namespaces. On v2 init starts in its cgroup
// (CLONE_INTO_CGROUP); on v1 it must still be placed.
//
// With zb set, the init is a zygote's: it maps root to the block's first id
// and the zygote's child ids (zygoteChildIDs...) to the rest of the block,
// and takes no uid slot.
func (e *Engine) newProc(name string, l cgroup.Limits, zb *zygoteBlock) (_ *proc, err error) {
	p := &proc{name: name, limits: l}
	defer func() {
		if err != nil {
			p.destroy()
		}
	}()
	var uids []syscall.SysProcIDMap
	if zb != nil {
		p.owner = zb.rootID()
		uids = []syscall.SysProcIDMap{
			{ContainerID: 0, HostID: zb.rootID(), Size: 1},
			{ContainerID: zygoteChildIDs, HostID: zb.childID(0), Size: MaxZygoteChildren},
		}
	} else {
		if p.slot, err = e.uids.acquire(); err != nil {
			return nil, err
		}
		p.owner = p.slot.userID()
		uids = []syscall.SysProcIDMap{
			{ContainerID: 0, HostID: p.slot.rootID(), Size: 1},
			{ContainerID: SandboxUID, HostID: p.slot.userID(), Size: 1},
		}
	}
	if p.live, err = lockFile(livenessLock(name)); err != nil {
		return nil, fmt.Errorf("liveness lock: %w", err)
	}
	if p.cg, err = e.cgroups.Create(name, l); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}

	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	socketpair := func() (ours, theirs *os.File, err error) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, nil, err
		}
		return os.NewFile(uintptr(fds[0]), "sock"), os.NewFile(uintptr(fds[1]), "sock-child"), nil
	}
	var cfgChild, syncR, errW, outW, errOutW, inR, controlChild *os.File
	if p.cfg, cfgChild, err = socketpair(); err != nil {
		return nil, fmt.Errorf("config socket: %w", err)
	}
	childEnds = append(childEnds, cfgChild)
	if syncR, p.syncW, err = os.Pipe(); err != nil {
		return nil, err
	}
	childEnds = append(childEnds, syncR)
	if p.errR, errW, err = os.Pipe(); err != nil {
		return nil, err
	}
	childEnds = append(childEnds, errW)
	if p.outR, outW, err = os.Pipe(); err != nil {
		return nil, err
	}
	childEnds = append(childEnds, outW)
	if p.errOutR, errOutW, err = os.Pipe(); err != nil {
		return nil, err
	}
	childEnds = append(childEnds, errOutW)
	if inR, p.inW, err = os.Pipe(); err != nil {
		return nil, err
	}
	childEnds = append(childEnds, inR)
	if p.control, controlChild, err = socketpair(); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	childEnds = append(childEnds, controlChild)

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
		ExtraFiles: []*os.File{cfgChild, syncR, errW, controlChild, e.self},
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
	if fd := p.cg.CloneFD(); fd >= 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWCGROUP
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
		p.placed = true
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("spawn sandbox init: %w", err)
	}
	p.cmd = cmd
	return p, nil
}

// place moves init into its cgroup (v1); a no-op when it started there.
func (p *proc) place() error {
	if p.placed {
		return nil
	}
	if err := p.cg.Add(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("place sandbox in its cgroup: %w", err)
	}
	p.placed = true
	return nil
}

// send hands init its config and the workspace mount.
func (p *proc) send(cfg []byte, workspace *os.File) error {
	rights := unix.UnixRights(int(workspace.Fd()))
	n, err := unix.SendmsgN(int(p.cfg.Fd()), cfg, rights, nil, 0)
	for err == nil && n < len(cfg) {
		var m int
		m, err = p.cfg.Write(cfg[n:])
		n += m
	}
	if err != nil {
		return fmt.Errorf("send init config: %w", err)
	}
	return unix.Shutdown(int(p.cfg.Fd()), unix.SHUT_WR)
}

// destroy kills and reaps init, removes the cgroup and releases the lock
// and uid slot. Safe on a half-built proc and more than once.
func (p *proc) destroy() {
	p.destroyOnce.Do(func() {
		if p.cg != nil {
			p.cg.Kill()
		}
		if p.cmd != nil && p.cmd.ProcessState == nil {
			p.cmd.Wait()
		}
		if p.cg != nil {
			p.cg.Delete()
		}
		for _, f := range []*os.File{p.cfg, p.syncW, p.errR, p.outR, p.errOutR, p.inW, p.control} {
			if f != nil {
				f.Close()
			}
		}
		if p.live != nil {
			os.Remove(p.live.Name())
			p.live.Close()
		}
		if p.slot != nil {
			p.slot.release()
		}
	})
}

// spares keeps up to n placed procs ready, refilling in the background.
type spares struct {
	taken  atomic.Int64 // runs served by a spare
	e      *Engine
	ready  chan *proc
	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *Engine) startSpares(n int) *spares {
	ctx, cancel := context.WithCancel(context.Background())
	s := &spares{e: e, ready: make(chan *proc, n), kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go s.refill()
	s.kick <- struct{}{}
	return s
}

// take returns a ready proc, or nil when none is ready.
func (s *spares) take() *proc {
	select {
	case p := <-s.ready:
		s.taken.Add(1)
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return p
	default:
		return nil
	}
}

func (s *spares) refill() {
	defer close(s.done)
	l := DefaultLimits()
	lim := cgroup.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUs: l.CPUs}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		}
		for len(s.ready) < cap(s.ready) && s.ctx.Err() == nil {
			p, err := s.e.newProc("sp-"+NewID(), lim, nil)
			if err == nil {
				err = p.place()
			}
			if err != nil {
				s.e.log.Warn("prepare spare sandbox", "err", err)
				if p != nil {
					p.destroy()
				}
				break
			}
			s.ready <- p
		}
	}
}

// close stops refilling and destroys the procs that are ready.
func (s *spares) close() {
	s.cancel()
	<-s.done
	for {
		select {
		case p := <-s.ready:
			p.destroy()
		default:
			return
		}
	}
}
