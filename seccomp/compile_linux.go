package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Compile turns the profile into a BPF program for the native
// architecture. Any other ABI the CPU offers (i386 and x32 on amd64) hits
// SCMP_ACT_KILL_PROCESS. Names libseccomp does not know are skipped (the
// syscall then gets the default action), as Docker and runc do.
//
// libseccomp lets an unconditional rule swallow every conditional rule of
// the same syscall, so "allow ioctl, but EPERM for TIOCSTI" would silently
// allow TIOCSTI. Compile honours such exceptions instead: they go into a
// first-stage filter (default: continue) chained in front of the main one.
// A conditional SCMP_ACT_ALLOW under an unconditional non-allow rule is an
// error.
func (p *Profile) Compile() (Program, error) {
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil, fmt.Errorf("%w: native arch: %w", ErrCompile, err)
	}
	kv, err := runningKernel()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	defAct, err := scmpAction(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("%w: defaultAction: %w", ErrCompile, err)
	}

	type resolved struct {
		rule
		nr  libseccomp.ScmpSyscall
		act libseccomp.ScmpAction
	}
	var all []resolved
	uncond := map[libseccomp.ScmpSyscall]resolved{}
	for _, r := range p.rules(native.String(), kv) {
		nr, err := libseccomp.GetSyscallFromName(r.name)
		if err != nil {
			continue // unknown to this libseccomp: default action
		}
		act, err := scmpAction(r.sc.Action, r.sc.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("%w: syscalls[%d] %s: %w", ErrCompile, r.entry, r.name, err)
		}
		res := resolved{r, nr, act}
		all = append(all, res)
		if len(r.sc.Args) > 0 {
			continue
		}
		if u, ok := uncond[nr]; ok && u.act != act {
			return nil, fmt.Errorf("%w: %s has two unconditional actions, %s (syscalls[%d]) and %s (syscalls[%d])",
				ErrCompile, r.name, u.sc.Action, u.entry, r.sc.Action, r.entry)
		}
		uncond[nr] = res
	}

	main, err := newFilter(defAct)
	if err != nil {
		return nil, err
	}
	defer main.Release()
	var except *libseccomp.ScmpFilter
	defer func() {
		if except != nil {
			except.Release()
		}
	}()
	added := map[libseccomp.ScmpSyscall]bool{}
	for _, r := range all {
		if len(r.sc.Args) == 0 {
			if r.act == defAct || added[r.nr] {
				continue
			}
			added[r.nr] = true
			if err := main.AddRule(r.nr, r.act); err != nil {
				return nil, fmt.Errorf("%w: syscalls[%d] %s: %w", ErrCompile, r.entry, r.name, err)
			}
			continue
		}
		conds, err := conditions(r.sc.Args)
		if err != nil {
			return nil, fmt.Errorf("%w: syscalls[%d] %s: %w", ErrCompile, r.entry, r.name, err)
		}
		target := main
		if u, ok := uncond[r.nr]; ok {
			if r.act == u.act {
				continue // already covered by the unconditional rule
			}
			if r.act == libseccomp.ActAllow {
				return nil, fmt.Errorf("%w: syscalls[%d] %s: conditional %s under the unconditional %s of syscalls[%d]; drop the unconditional entry",
					ErrCompile, r.entry, r.name, r.sc.Action, u.sc.Action, u.entry)
			}
			if except == nil {
				if except, err = newFilter(libseccomp.ActAllow); err != nil {
					return nil, err
				}
			}
			target = except
		} else if r.act == defAct {
			continue // non-matching calls get the default anyway
		}
		if err := target.AddRuleConditional(r.nr, r.act, conds); err != nil {
			return nil, fmt.Errorf("%w: syscalls[%d] %s: %w", ErrCompile, r.entry, r.name, err)
		}
	}

	prog, err := export(main)
	if err != nil {
		return nil, err
	}
	if except == nil {
		return prog, nil
	}
	first, err := export(except)
	if err != nil {
		return nil, err
	}
	return chain(first, prog)
}

func newFilter(def libseccomp.ScmpAction) (*libseccomp.ScmpFilter, error) {
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("%w: new filter: %w", ErrCompile, err)
	}
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		f.Release()
		return nil, fmt.Errorf("%w: bad-arch action: %w", ErrCompile, err)
	}
	// A binary search over syscall numbers instead of a linear scan.
	if err := f.SetOptimize(2); err != nil {
		f.Release()
		return nil, fmt.Errorf("%w: optimize: %w", ErrCompile, err)
	}
	return f, nil
}

// export writes f's BPF to a memfd (libseccomp 2.5 only exports to a file
// descriptor) and reads it back.
func export(f *libseccomp.ScmpFilter) (Program, error) {
	fd, err := unix.MemfdCreate("nsbox-seccomp-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: memfd_create: %w", ErrCompile, err)
	}
	file := os.NewFile(uintptr(fd), "nsbox-seccomp-bpf")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("%w: export BPF: %w", ErrCompile, err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%w: rewind BPF: %w", ErrCompile, err)
	}
	b, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("%w: read BPF: %w", ErrCompile, err)
	}
	prog := Program(b)
	if err := prog.check(); err != nil {
		return nil, fmt.Errorf("%w: libseccomp output: %w", ErrCompile, err)
	}
	return prog, nil
}

func scmpAction(a Action, errnoRet *uint) (libseccomp.ScmpAction, error) {
	ret := int16(unix.EPERM)
	if errnoRet != nil {
		ret = int16(*errnoRet)
	}
	switch a {
	case ActKill, ActKillThread:
		return libseccomp.ActKillThread, nil
	case ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case ActTrap:
		return libseccomp.ActTrap, nil
	case ActErrno:
		return libseccomp.ActErrno.SetReturnCode(ret), nil
	case ActTrace:
		return libseccomp.ActTrace.SetReturnCode(ret), nil
	case ActAllow:
		return libseccomp.ActAllow, nil
	case ActLog:
		return libseccomp.ActLog, nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("unknown action %q", a)
}

func conditions(args []Arg) ([]libseccomp.ScmpCondition, error) {
	conds := make([]libseccomp.ScmpCondition, 0, len(args))
	for _, a := range args {
		var op libseccomp.ScmpCompareOp
		vals := []uint64{a.Value}
		switch a.Op {
		case OpNotEqual:
			op = libseccomp.CompareNotEqual
		case OpLessThan:
			op = libseccomp.CompareLess
		case OpLessEqual:
			op = libseccomp.CompareLessOrEqual
		case OpEqualTo:
			op = libseccomp.CompareEqual
		case OpGreaterEqual:
			op = libseccomp.CompareGreaterEqual
		case OpGreaterThan:
			op = libseccomp.CompareGreater
		case OpMaskedEqual:
			op = libseccomp.CompareMaskedEqual
			vals = append(vals, a.ValueTwo) // mask, then expected value
		default:
			return nil, fmt.Errorf("unknown op %q", a.Op)
		}
		c, err := libseccomp.MakeCondition(a.Index, op, vals...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("args index %d", a.Index), err)
		}
		conds = append(conds, c)
	}
	return conds, nil
}
