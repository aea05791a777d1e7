// Package envd serves E2B's envd protocol (port 49983 in E2B: the
// in-sandbox daemon's API) over a session of the core: the Connect-RPC
// process service over the session's process agent, the filesystem
// service and REST /files over its workspace's file operations, and
// /health and /envs. agentapi/e2b routes and authorizes a request, then
// hands it to New's handler with its sandbox in the context; envd needs
// only the small Core it declares.
//
// The protocol's definitions are here too: the process and filesystem
// services' .proto files, written from E2B's published spec, and the Go
// code generated from them (protobuf messages and connectrpc.com/connect
// handlers), in process/ and filesystem/. `make generate` regenerates it.
package envd

//go:generate protoc -I . -I /usr/include --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative process/process.proto filesystem/filesystem.proto
