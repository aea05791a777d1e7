// Package rootfs keeps the read-only root filesystems that nsbox sandboxes
// run in: the store, its metadata and the locks that keep a tree in use from
// being deleted. Making trees is left to its subpackages, rootfs/build
// (Debian packages with mmdebstrap), rootfs/importer (a directory or a
// tar) and rootfs/oci (an OCI image), which all go through Store.Create.
//
// A store (default /var/lib/nsbox/rootfs) holds one directory per rootfs:
//
//	<Root>/<name>/rootfs/    the tree the engine bind-mounts read-only as /
//	<Root>/<name>/meta.json  what it is: profile, Python version, packages, digest
//	<Root>/<name>/.lock      shared flock held by every sandbox using it
//
// Create populates a tree in <Root>/.tmp-<name>-<rand>/ on the same
// filesystem and renames it into place atomically, so List never shows a
// half tree. Replaced or removed trees still held by a sandbox are parked as
// <Root>/.old-<name>-<rand>/ and deleted by a later Create once no sandbox
// holds them.
//
// Every tree gets the MountPoints directories, a `sandbox` user and group
// (uid/gid 1000, home /workspace), /etc/hostname and /etc/hosts, written
// without following any link out of the tree (an import may be hostile).
package rootfs
