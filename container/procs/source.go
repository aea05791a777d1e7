package procs

import _ "embed"

// AgentSource is the agent's Python source, which runner.StartAgent sends
// to the runner to run in the child it forks.
//
//go:embed agent.py
var AgentSource string
