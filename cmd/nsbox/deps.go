package main

// Modules the project standardises on; imported here until their packages land.
import (
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/procfs"
)
