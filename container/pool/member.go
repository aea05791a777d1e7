package pool

import (
	"context"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// member is a started runner as the pool keeps it: a *runner.Runner in
// the daemon, a fake in the tests that need neither root nor a rootfs.
type member interface {
	// Preimport, Kill and Forked are runner.Runner's.
	Preimport(ctx context.Context, modules []string, timeout time.Duration) (skipped []string, err error)
	Kill(v container.Status) (*container.Result, error)
	Forked() bool

	alive() bool           // false once the interpreter or its sandbox has ended
	done() <-chan struct{} // closed when the sandbox ends
	cpu() time.Duration    // CPU time the sandbox has used so far
	id() string
	foreground() error // the CPU weight of a run (it was made in the background)
}

// runnerMember is a *runner.Runner in the pool.
type runnerMember struct{ *runner.Runner }

// startRunner is the pool's way to start a member: runner.StartLang on
// the Starter.
func startRunner(st runner.Starter) func(context.Context, container.Spec, runner.Language) (member, error) {
	return func(ctx context.Context, spec container.Spec, lang runner.Language) (member, error) {
		rn, err := runner.StartLang(ctx, st, spec, lang)
		if err != nil {
			return nil, err
		}
		return runnerMember{rn}, nil
	}
}

func (m runnerMember) alive() bool {
	select {
	case <-m.Sandbox().Done():
		return false
	default:
	}
	st, _ := m.Dead()
	return st == ""
}

func (m runnerMember) done() <-chan struct{} { return m.Sandbox().Done() }

func (m runnerMember) cpu() time.Duration {
	st, err := m.Sandbox().Stats()
	if err != nil {
		return 0
	}
	return st.CPUUsage
}

func (m runnerMember) id() string { return m.Sandbox().ID() }

func (m runnerMember) foreground() error { return m.Sandbox().Foreground() }
