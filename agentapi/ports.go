package agentapi

// PortStats are the connections made to a session's ports through the
// daemon, in its present sandbox (a revive starts them again).
type PortStats struct {
	Connections   int64 `json:"connections"`    // made so far
	Open          int64 `json:"open"`           // open now
	BytesSent     int64 `json:"bytes_sent"`     // to the sandbox's servers
	BytesReceived int64 `json:"bytes_received"` // from them
}
