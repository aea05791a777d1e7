package seccomp

import (
	"encoding/binary"
	"fmt"
)

// Program is a compiled filter: the raw array of struct sock_filter
// (8 bytes each, native byte order) that libseccomp exports and
// seccomp(SECCOMP_SET_MODE_FILTER) takes.
type Program []byte

// Classic BPF encoding, from linux/filter.h and linux/seccomp.h.
const (
	insnSize    = 8
	maxInsns    = 4096 // BPF_MAXINSNS
	bpfRet      = 0x06
	bpfJmp      = 0x05
	bpfK        = 0x00
	bpfJA       = 0x00
	retAllow    = 0x7fff0000 // SECCOMP_RET_ALLOW
	bpfClassMsk = 0x07
)

// insn is one struct sock_filter.
type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// Len returns the number of instructions.
func (p Program) Len() int { return len(p) / insnSize }

func (p Program) check() error {
	switch {
	case len(p) == 0:
		return fmt.Errorf("%w: empty", ErrInvalidProgram)
	case len(p)%insnSize != 0:
		return fmt.Errorf("%w: %d bytes is not a whole number of %d-byte instructions", ErrInvalidProgram, len(p), insnSize)
	case p.Len() > maxInsns:
		return fmt.Errorf("%w: %d instructions, the kernel takes at most %d", ErrInvalidProgram, p.Len(), maxInsns)
	}
	return nil
}

func (p Program) insn(i int) insn {
	b := p[i*insnSize:]
	return insn{
		code: binary.NativeEndian.Uint16(b[0:]),
		jt:   b[2],
		jf:   b[3],
		k:    binary.NativeEndian.Uint32(b[4:]),
	}
}

func (p Program) setInsn(i int, in insn) {
	b := p[i*insnSize:]
	binary.NativeEndian.PutUint16(b[0:], in.code)
	b[2], b[3] = in.jt, in.jf
	binary.NativeEndian.PutUint32(b[4:], in.k)
}

// chain returns first followed by next, with every "ret ALLOW" of first
// turned into a jump to the start of next. first decides (ERRNO, KILL, ...)
// or defers to next; the kernel's own rule for stacked filters, in one
// program.
func chain(first, next Program) (Program, error) {
	out := make(Program, 0, len(first)+len(next))
	out = append(out, first...)
	n := first.Len()
	for i := 0; i < n; i++ {
		in := out.insn(i)
		if in.code&bpfClassMsk != bpfRet {
			continue
		}
		if in.code != bpfRet|bpfK {
			return nil, fmt.Errorf("%w: instruction %d returns a register (code %#x), cannot chain", ErrCompile, i, in.code)
		}
		if in.k == retAllow {
			out.setInsn(i, insn{code: bpfJmp | bpfJA, k: uint32(n - i - 1)})
		}
	}
	out = append(out, next...)
	if err := out.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	return out, nil
}
