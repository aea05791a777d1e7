package mcp

import "errors"

var (
	// ErrUnknownFormat is returned by Definitions for a format other than
	// openai, anthropic or mcp.
	ErrUnknownFormat = errors.New("unknown tool definition format (want openai, anthropic or mcp)")
	// ErrUnknownSessionMode is returned by New for a mode other than
	// per-connection or per-call.
	ErrUnknownSessionMode = errors.New("unknown session mode (want per-connection or per-call)")
)
