package pool

import "errors"

// ErrInvalidProfile: a profile is malformed or clashes with another; the
// error says which and why.
var ErrInvalidProfile = errors.New("invalid pool profile")
