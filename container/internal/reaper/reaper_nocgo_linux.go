//go:build !cgo

package reaper

// Available says whether this binary can be a sandbox's reaper: a build
// without cgo has no constructor.
const Available = false
