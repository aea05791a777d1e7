package agentapi

// TerminalProtocol is the Upgrade token of POST
// /v1/sessions/{id}/terminal: the request (a TerminalRequest) is answered
// 101 Switching Protocols, and the connection then carries terminal
// frames both ways (agentapi/termframe): a type byte, a 4-byte big-endian
// length, the payload.
const TerminalProtocol = "nsbox-terminal.1"

// HeaderTerminalPid is the 101 answer's header naming the terminal's
// process in the sandbox (its pid there).
const HeaderTerminalPid = "Nsbox-Terminal-Pid"

// TerminalRequest opens a terminal in a session: a process on a
// pseudo-terminal of the sandbox's own, as its user.
type TerminalRequest struct {
	// Cmd is the program ("": /bin/bash, with Args -i -l); Args its
	// arguments.
	Cmd  string   `json:"cmd,omitempty"`
	Args []string `json:"args,omitempty"`
	// Env is added to the sandbox's environment (TERM is xterm-256color
	// unless set here).
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory ("": /workspace, or /home/user).
	Cwd string `json:"cwd,omitempty"`
	// Rows and Cols are the window size (0: 24 and 80).
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// TerminalExit is how a terminal's process ended: the payload of its last
// frame (FrameExit).
type TerminalExit struct {
	// ExitCode is the exit status, -1 when a signal ended it (Signal).
	ExitCode int32 `json:"exit_code"`
	Signal   int   `json:"signal,omitempty"`
	// Status is "exit status N", "signal: NAME" or output_limit.
	Status string `json:"status"`
}

// Terminal frame types. From the client: FrameInput (what is typed),
// FrameResize (rows and cols, two big-endian uint16s), FrameSignal (a
// signal number, a big-endian uint32, for the terminal's process group).
// From the daemon: FrameOutput, then FrameExit (a TerminalExit as JSON)
// or FrameError (why the terminal ended early, as text); the connection
// closes after either.
const (
	FrameInput  byte = 'i'
	FrameResize byte = 'r'
	FrameSignal byte = 's'
	FrameOutput byte = 'o'
	FrameExit   byte = 'x'
	FrameError  byte = 'e'
)
