package build

import "errors"

var (
	// ErrUnknownProfile means Options.Profile is not one of Profiles().
	ErrUnknownProfile = errors.New("unknown profile")
	// ErrNotRoot means a build was started without root privileges.
	ErrNotRoot = errors.New("nsbox rootfs build must run as root")
	// ErrNoMmdebstrap means mmdebstrap is not installed.
	ErrNoMmdebstrap = errors.New("mmdebstrap not found: install it: apt-get install mmdebstrap")
	// ErrMirrorUnreachable means mmdebstrap could not fetch from the mirror.
	ErrMirrorUnreachable = errors.New("mirror unreachable")
	// ErrBuildFailed means mmdebstrap or a post-build check failed.
	ErrBuildFailed = errors.New("rootfs build failed")
)
