// Package mcp serves nsbox to agents as a Model Context Protocol server
// (github.com/modelcontextprotocol/go-sdk) over the daemon's Go client: a
// run tool per language the daemon's registry describes with sessions
// (GET /v1/info language_info: run_python, run_javascript with its
// typescript switch), run_shell, write_file, read_file, list_files,
// fork_session and reset_session, backed by one nsbox session per MCP
// connection and run tool (or a fresh sandbox per call). The same tool
// definitions are exported for OpenAI and Anthropic function calling by
// Definitions.
package mcp
