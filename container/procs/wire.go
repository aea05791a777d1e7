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
	Pty    *Size             `json:"pty,omitempty"` // start on a terminal; resize
	Pid    uint32            `json:"pid,omitempty"`
	Data   []byte            `json:"data,omitempty"` // JSON: base64
	Signal int               `json:"signal,omitempty"`
	// The file operations' (files.go).
	Path  string `json:"path,omitempty"`
	To    string `json:"to,omitempty"`
	Depth int    `json:"depth,omitempty"`
	Write bool   `json:"write,omitempty"`
	Fh    uint64 `json:"fh,omitempty"`
	// File metadata's (meta.go): what fsetmeta sets; whose fmeta reads.
	Meta  map[string]string `json:"meta,omitempty"`
	Paths []string          `json:"paths,omitempty"`
	// The watches' (watch.go).
	Recursive bool   `json:"recursive,omitempty"`
	Wid       uint64 `json:"wid,omitempty"`
}

// message is one frame from the agent: a reply (ID set), an event of a
// process (Pid set, no ID) or of a watch (Wid set, no ID).
type message struct {
	ID    *uint64 `json:"id"`
	Pid   uint32  `json:"pid"`
	Error string  `json:"error"`
	Kind  string  `json:"kind"` // what Error is: not_found_cmd, not_found_cwd, start_*, not_found, stdin
	Out   []byte  `json:"out"`
	Err   []byte  `json:"err"`
	Pty   []byte  `json:"pty"` // a terminal's output
	End   bool    `json:"end"`
	Code  int32   `json:"code"`
	// Signal is the signal that ended the process (End), 0 for an exit.
	Signal int `json:"signal"`
	// The file operations' replies (files.go).
	Entry   *FileEntry  `json:"entry"`
	Entries []FileEntry `json:"entries"`
	Created bool        `json:"created"`
	Fh      uint64      `json:"fh"`
	Size    int64       `json:"size"`
	Data    []byte      `json:"data"`
	// File metadata's (meta.go): fsetmeta's read back; fmeta's, one a path.
	Meta  map[string]string   `json:"meta"`
	Metas []map[string]string `json:"metas"`
	// A watch's: its id (a reply to fwatch, or its events, Ev, or its
	// End), events as [op, name] pairs.
	Wid uint64      `json:"wid"`
	Ev  [][2]string `json:"ev"`
}
