// Package agentapi is nsbox's public wire contract: the JSON request and
// response types of the daemon's HTTP/1.1 API on its Unix socket, the stream
// events, the error codes and the API version. It has no behaviour of its
// own; agentapi/server serves it and agentapi/client speaks it.
package agentapi

// Version is the API version; every route is prefixed with "/" + Version.
const Version = "v1"

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/nsbox/nsbox.sock"

// ContentTypeJSON and ContentTypeNDJSON are the two body formats. A run
// request sent with "Accept: application/x-ndjson" is answered as a stream
// of Events, one JSON object per line.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeNDJSON = "application/x-ndjson"
)

// HeaderRunID carries the run id on every /v1/runs response that got one.
const HeaderRunID = "X-Nsbox-Run-Id"

// HeaderTruncated is "true" on a session's file list that stops at its cap
// (FileList.FilesTruncated).
const HeaderTruncated = "X-Nsbox-Truncated"
