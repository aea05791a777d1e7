// Package mcp serves nsbox to agents as a Model Context Protocol server
// (github.com/modelcontextprotocol/go-sdk) over the daemon's Go client: the
// tools run_python, run_shell, write_file, read_file, list_files and
// reset_session, backed by one nsbox session per MCP connection (or a fresh
// sandbox per call), and run_javascript where the rootfs has Node.js, backed
// by a second, Node.js session per connection. The same tool definitions are exported for OpenAI and
// Anthropic function calling by Definitions.
package mcp
