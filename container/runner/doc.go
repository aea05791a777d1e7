// Package runner runs Python cells in a persistent interpreter inside an
// nsbox sandbox, like a notebook kernel. An embedded runner script reads
// cells over the sandbox's control socket (fd 3), executes them in one
// __main__ namespace and answers with the repr of the last expression, the
// exception (with a traceback trimmed to the user's code) and every
// matplotlib figure as PNG. The cell's stdout and stderr go to the real fds
// 1 and 2, so subprocess output is captured too; a per-cell marker written
// to both streams at the cell's end tells Exec where the cell's output stops.
//
// A JavaScript runner (StartLang) speaks the same protocol from node: an
// embedded runner.js runs cells in persistent vm contexts, with top-level
// await, and TypeScript cells with their types stripped by esbuild.
package runner
