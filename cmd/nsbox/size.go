package main

import "github.com/nsbox/nsbox/agentapi/limits"

// Sizes on the command line read as in the config file.
var (
	parseSize  = limits.ParseSize
	humanBytes = limits.HumanBytes
)
