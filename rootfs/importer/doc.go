// Package importer makes a rootfs from a directory or a tar archive (plain or
// gzip, e.g. `docker export` output) and installs it in a rootfs.Store
// (through Store.Create); Layers applies an OCI image's layers, in order and
// with their whiteouts, for rootfs/oci.
//
// The source is untrusted: every entry is written under the new tree with
// openat2 and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, so no symlink in the
// archive or the tree can redirect a write outside it. What is refused or
// changed (".." names, device nodes, setuid bits) is listed in the Report;
// an image's layer with an entry a tar import would skip is refused whole
// (ErrRefused).
package importer
