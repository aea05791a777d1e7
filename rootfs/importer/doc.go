// Package importer makes a rootfs from a directory or a tar archive (plain or
// gzip, e.g. `docker export` output) and installs it in a rootfs.Store
// (through Store.Create).
//
// The source is untrusted: every entry is written under the new tree with
// openat2 and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, so no symlink in the
// archive or the tree can redirect a write outside it. What is refused or
// changed (".." names, device nodes, setuid bits) is listed in the Report.
package importer
