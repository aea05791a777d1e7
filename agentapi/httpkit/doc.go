// Package httpkit is the HTTP plumbing shared by nsbox's two listeners, the
// /v1 API (agentapi/server) and the E2B endpoint (agentapi/e2b): the limits
// on connections, header bytes, bodies and the bytes of bodies held at once,
// the read/header/idle deadlines and the write deadline of answers, the strict JSON decoder, and the
// Retry-After hint. Each server keeps its routes and its own settings; what
// a request may cost the daemon is decided here, once.
package httpkit
