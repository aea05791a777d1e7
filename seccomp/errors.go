package seccomp

import "errors"

var (
	// ErrInvalidProfile is wrapped by every error Load returns for a profile
	// that does not parse or names an unknown action, operator or
	// architecture.
	ErrInvalidProfile = errors.New("invalid seccomp profile")

	// ErrCompile is wrapped by the errors Compile returns when libseccomp
	// refuses the policy or the profile's rules contradict each other.
	ErrCompile = errors.New("seccomp compile failed")

	// ErrInvalidProgram is returned by Install for a Program that is not a
	// whole, non-empty array of sock_filter instructions.
	ErrInvalidProgram = errors.New("invalid seccomp program")
)
