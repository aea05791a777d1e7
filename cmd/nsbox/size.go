package main

import (
	"time"

	"github.com/nsbox/nsbox/limits"
)

// Sizes on the command line read as in the config file.
var (
	parseSize  = limits.ParseSize
	humanBytes = limits.HumanBytes
)

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
