package agentapi

// Network is a run's or session's egress policy. The sandbox still has
// only lo: the daemon serves a forward proxy inside its network namespace
// and points HTTP_PROXY/HTTPS_PROXY (and pip's and npm's settings) at it.
// Everything asked for must be within the operator's [network] config.
type Network struct {
	// Allow lists the destinations: "pypi.org", "*.pythonhosted.org" (one
	// label), "api.github.com:443", an IP literal the operator allows. A
	// host without a port allows 80 and 443.
	Allow []string `json:"allow"`
	// Secrets names operator-configured secrets: the sandbox's variable
	// NAME holds a placeholder, which the proxy swaps for the value in
	// requests to that secret's hosts only.
	Secrets []string `json:"secrets,omitempty"`
	// MaxConnections and MaxBytes cap the run's egress (0: the operator's
	// cap); a connection past them is ended with an error inside.
	MaxConnections int   `json:"max_connections,omitempty"`
	MaxBytes       int64 `json:"max_bytes,omitempty"`
}

// NetworkReport is the egress audit of one run or session exec.
type NetworkReport struct {
	Connections   int             `json:"connections"`
	Refused       int             `json:"refused"`
	BytesSent     int64           `json:"bytes_sent"`
	BytesReceived int64           `json:"bytes_received"`
	Capped        string          `json:"capped,omitempty"`
	Records       []NetworkRecord `json:"records"`
}

// NetworkRecord is one connection (or plain-HTTP request) through the
// proxy.
type NetworkRecord struct {
	Host     string   `json:"host"`
	Port     int      `json:"port"`
	Addr     string   `json:"addr,omitempty"`
	Method   string   `json:"method"`
	Sent     int64    `json:"bytes_sent"`
	Received int64    `json:"bytes_received"`
	Allowed  bool     `json:"allowed"`
	Reason   string   `json:"reason,omitempty"`
	Secrets  []string `json:"secrets,omitempty"`
	Cached   bool     `json:"cached,omitempty"`
}
