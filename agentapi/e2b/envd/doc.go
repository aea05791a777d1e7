// Package envd holds the E2B envd protocol as nsbox speaks it: the
// process and filesystem services' .proto files, written from E2B's
// published spec, and the Go code generated from them (protobuf messages
// and connectrpc.com/connect handlers). `make generate` regenerates it.
package envd

//go:generate protoc -I . -I /usr/include --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative process/process.proto filesystem/filesystem.proto
