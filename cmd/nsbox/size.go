package main

import "github.com/nsbox/nsbox/limits"

// Sizes on the command line read as in the config file.
var (
	parseSize  = limits.ParseSize
	humanBytes = limits.HumanBytes
)
