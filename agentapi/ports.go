package agentapi

// UpgradeTCP is the Upgrade protocol of GET /v1/sessions/{id}/ports/{port}
// (no trailing slash) that makes the request's connection a raw TCP
// tunnel to the session's port (`nsbox session port`).
const UpgradeTCP = "tcp"

// PortStats are the connections made to a session's ports through the
// daemon, in its present sandbox (a revive starts them again).
type PortStats struct {
	Connections   int64 `json:"connections"`    // made so far
	Open          int64 `json:"open"`           // open now
	BytesSent     int64 `json:"bytes_sent"`     // to the sandbox's servers
	BytesReceived int64 `json:"bytes_received"` // from them
}
