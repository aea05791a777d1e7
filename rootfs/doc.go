// Package rootfs builds, imports and keeps the read-only root filesystems that
// nsbox sandboxes run in.
//
// A store (default /var/lib/nsbox/rootfs) holds one directory per rootfs:
//
//	<Root>/<name>/rootfs/    the tree the engine bind-mounts read-only as /
//	<Root>/<name>/meta.json  what it is: profile, Python version, packages, digest
//	<Root>/<name>/.lock      shared flock held by every sandbox using it
//
// Builds (mmdebstrap) and imports (a directory or a tar, e.g. `docker export`)
// happen in <Root>/.tmp-<name>-<rand>/ on the same filesystem and are renamed
// into place atomically, so List never shows a half tree. Replaced or removed
// trees still held by a sandbox are parked as <Root>/.old-<name>-<rand>/ and
// deleted by a later Build or Import once no sandbox holds them.
//
// Every tree gets the MountPoints directories, a `sandbox` user and group
// (uid/gid 1000, home /workspace), /etc/hostname and /etc/hosts.
//
// Builds keep only what a sandbox runs: dpkg never unpacks docs, man pages,
// translations, C headers or static libraries (path-exclude), and packages
// needed only to build software (the compiler toolchain python3-scipy drags
// in via python3-pythran, boost and BLAS headers, perl) are removed with
// dpkg --purge --force-depends, so meta.json's package list stays true; its
// "trim" record lists what was excluded, purged and removed. Setuid/setgid
// bits are cleared and device nodes deleted. The datasci profile also ships
// matplotlib's font cache in /usr/share/nsbox/matplotlib; a hook in the
// tree's sitecustomize.py copies it into matplotlib's cache dir (in the
// sandbox's empty HOME) on the first import of matplotlib.
package rootfs
