package seccomp

import (
	"errors"
	"testing"
)

func progOf(ins ...insn) Program {
	p := make(Program, len(ins)*insnSize)
	for i, in := range ins {
		p.setInsn(i, in)
	}
	return p
}

func TestChain(t *testing.T) {
	const (
		ldAbs   = 0x20
		jeqK    = 0x15
		retErrn = 0x00050001
		retKill = 0x80000000
	)
	first := progOf(
		insn{code: ldAbs, k: 0},
		insn{code: jeqK, jt: 0, jf: 1, k: 16},
		insn{code: bpfRet | bpfK, k: retErrn},
		insn{code: bpfRet | bpfK, k: retAllow},
	)
	next := progOf(insn{code: bpfRet | bpfK, k: retAllow}, insn{code: bpfRet | bpfK, k: retKill})
	got, err := chain(first, next)
	if err != nil {
		t.Fatal(err)
	}
	want := progOf(
		insn{code: ldAbs, k: 0},
		insn{code: jeqK, jt: 0, jf: 1, k: 16},
		insn{code: bpfRet | bpfK, k: retErrn},
		insn{code: bpfJmp | bpfJA, k: 0}, // falls into next
		insn{code: bpfRet | bpfK, k: retAllow},
		insn{code: bpfRet | bpfK, k: retKill},
	)
	if string(got) != string(want) || got.Len() != 6 {
		t.Errorf("chain:\n got %x\nwant %x", []byte(got), []byte(want))
	}

	retA := progOf(insn{code: bpfRet | 0x10})
	if _, err := chain(retA, next); !errors.Is(err, ErrCompile) {
		t.Errorf("chain with ret A = %v, want ErrCompile", err)
	}
}

func TestProgramLen(t *testing.T) {
	if got := make(Program, 24).Len(); got != 3 {
		t.Errorf("Len = %d, want 3", got)
	}
}
