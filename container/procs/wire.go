package procs

// request is one frame to the agent.
type request struct {
	ID     uint64            `json:"id"`
	Op     string            `json:"op"`
	Cmd    string            `json:"cmd,omitempty"`
	Args   []string          `json:"args,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Cwd    string            `json:"cwd,omitempty"`
	Stdin  bool              `json:"stdin,omitempty"`
	Pid    uint32            `json:"pid,omitempty"`
	Data   []byte            `json:"data,omitempty"` // JSON: base64
	Signal int               `json:"signal,omitempty"`
}

// message is one frame from the agent: a reply (ID set) or an event of a
// process (Pid set, no ID).
type message struct {
	ID    *uint64 `json:"id"`
	Pid   uint32  `json:"pid"`
	Error string  `json:"error"`
	Kind  string  `json:"kind"` // what Error is: not_found_cmd, not_found_cwd, start_*, not_found, stdin
	Out   []byte  `json:"out"`
	Err   []byte  `json:"err"`
	End   bool    `json:"end"`
	Code  int32   `json:"code"`
	// Signal is the signal that ended the process (End), 0 for an exit.
	Signal int `json:"signal"`
}
