package oci

import "errors"

var (
	// ErrInsecure means a registry was to be reached over plain http
	// without Options.Insecure, or with it but not on a loopback address.
	ErrInsecure = errors.New("plain http to a registry refused")
	// ErrPlatform means the image has no variant for the platform asked for.
	ErrPlatform = errors.New("no image for the platform")
	// ErrBadImage means an image or an archive is malformed: no single
	// image to take, a layer whose content does not match its digest.
	ErrBadImage = errors.New("bad image")
)
