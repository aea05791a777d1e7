// Package server serves nsbox's HTTP/1.1 + JSON API (package agentapi) on a
// listener, normally the daemon's Unix socket: strict request decoding and
// validation, admission control (bounded concurrency and queue), NDJSON
// streaming, peer-credential logging, Prometheus metrics and graceful
// shutdown. It drives sandboxes through the Runner interface it declares and
// finds root filesystems through RootfsStore; the daemon wires in the engine.
package server
