// Package session manages live Python sessions: each is a sandbox running
// a runner.Runner whose variables, imports and /workspace files persist
// between execs. The Manager creates, lists and deletes them, serialises
// execs per session, expires idle ones, caps how many live at once, marks
// a session dead (with the reason) when its sandbox runs out of memory or
// crashes, and ends every session on Close.
package session
