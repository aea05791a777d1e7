package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// daemonCase is one kind of request.
type daemonCase struct {
	name   string
	target string
	warm   bool           // wait for full pools before each sample
	pools  *benchd.Daemon // whose pools (nil: the bench daemon's)
	cold   string         // the case whose p50 this one's is compared with
	do     func(ctx context.Context) (pooled bool, err error)
}

// runRequest is a request that runs code on rootfsName (the daemon's
// default when empty) with lim (the default pool's when nil) and says
// whether it took a warm runner.
func runRequest(cl *client.Client, rootfsName, code string, lim *agentapi.Limits) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		res, err := cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Rootfs: rootfsName, Limits: lim})
		for n := 0; ; {
			d, again := retryWait(err, &n)
			if !again {
				break
			}
			if err := measure.Sleep(ctx, d); err != nil {
				return false, err
			}
			res, err = cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Rootfs: rootfsName, Limits: lim})
		}
		if err != nil {
			return false, err
		}
		if res.Status != agentapi.StatusOK {
			return false, fmt.Errorf("status %s: %s%s", res.Status, res.Error, res.Stderr)
		}
		return res.Pooled, nil
	}
}

// retryWait says whether err asks for another try and after how long:
// a 429 (a --socket daemon with a short queue: a slot frees within
// milliseconds) at once, and up to 10 503s (a transient refusal on a
// loaded machine) after their Retry-After, 0.1-2 s.
func retryWait(err error, unavailable *int) (time.Duration, bool) {
	var ae *agentapi.Error
	switch {
	case !errors.As(err, &ae):
		return 0, false
	case ae.Status == http.StatusServiceUnavailable:
		*unavailable++
		return min(max(ae.RetryAfter, 100*time.Millisecond), 2*time.Second), *unavailable <= 10
	}
	return time.Millisecond, ae.Status == http.StatusTooManyRequests
}

// coldLimits differ from the default pool's (pids) so that a run starts
// cold at the same cost.
var coldLimits = &agentapi.Limits{Pids: 65}
