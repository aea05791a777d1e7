package mcp

import "errors"

var (
	// ErrUnknownFormat is returned by Definitions for a format other than
	// openai, anthropic or mcp.
	ErrUnknownFormat = errors.New("unknown tool definition format (want openai, anthropic or mcp)")
	// ErrUnknownSessionMode is returned by New for a mode other than
	// per-connection or per-call.
	ErrUnknownSessionMode = errors.New("unknown session mode (want per-connection or per-call)")
	// ErrSessionLanguage is a run tool's call whose language the session
	// it would run in cannot take (TypeScript in a JavaScript session, or
	// a session of another runner).
	ErrSessionLanguage = errors.New("the session's language does not fit this call")
)
