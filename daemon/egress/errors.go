package egress

import "errors"

// The package's errors; callers match them with errors.Is.
var (
	// ErrInvalidRule: an allow entry that ParseRule refuses.
	ErrInvalidRule = errors.New("invalid network rule")
	// ErrNoCA: a policy with secrets needs Options.CA to terminate TLS.
	ErrNoCA = errors.New("a policy with secrets needs the daemon's CA (Options.CA)")
	// ErrInvalidPolicy: a policy New refuses (a secret without a name or
	// hosts, a negative cap).
	ErrInvalidPolicy = errors.New("invalid network policy")
)
