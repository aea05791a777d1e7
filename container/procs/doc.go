// Package procs is the host's side of the process agent: a small Python
// program that a sandbox's runner forks on request (runner.StartAgent)
// and that starts processes inside the sandbox, passes their output on as
// it arrives, writes their stdin and signals them. The agent speaks over a
// socketpair the host made and handed to the runner over its control
// socket, so it listens on nothing in the sandbox.
//
// Every process's events go to its subscribers: the Process that Start
// returned and any that Connect made, each from when it subscribed. Each
// subscription has a bounded buffer; one that falls behind for
// SlowTimeout is dropped (ErrSlow) rather than hold up the others.
package procs
