package main

import (
	"time"

	"github.com/nsbox/nsbox/daemon/config"
)

// Sizes on the command line read as in the config file.
var (
	parseSize  = config.ParseSize
	humanBytes = config.HumanBytes
)

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
