// Package workspace is a sandbox's /workspace as the engine sees it from the
// host: a size-capped tmpfs that exists only as a detached mount, reached
// through its fd with every resolution beneath it and no symlink followed.
// The engine writes a run's input files into it, hands the mount to the
// sandbox, and lists what the run changed; sessions read and write it while
// the sandbox lives.
package workspace
