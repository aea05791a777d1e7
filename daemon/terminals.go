package daemon

import (
	"context"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/terminal"
)

// OpenTerminal opens a terminal in a session created with processes
// (agentapi.SessionRequest.Processes; an E2B sandbox has one): a process
// on a pseudo-terminal of its sandbox, started by its process agent.
// The caller must own the session, as for an exec. An open terminal
// holds its session in use (its idle timeout does not pass) until it is
// closed.
func (d *Daemon) OpenTerminal(ctx context.Context, id string, req *agentapi.TerminalRequest) (*terminal.Terminal, error) {
	a, release, err := d.HeldProcesses(ctx, id)
	if err != nil {
		return nil, err
	}
	t, err := terminal.Open(ctx, a, req, release)
	if err != nil {
		release()
	}
	return t, err
}
