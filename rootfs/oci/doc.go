// Package oci makes a rootfs from an OCI or Docker image, with
// go-containerregistry: pulled from a registry (Pull) or read from an
// archive (Import: an OCI image layout, in a tar or a directory, or
// `docker save` output, told apart by content).
//
// An image is as untrusted as any import. Its layers are applied in order by
// importer.Layers, with the importer's rules and stricter: an entry an import
// of a tarball would skip (a ".." name, a device node, a fifo, a write
// through a symlink, a hard link out of the tree) refuses the whole image;
// setuid/setgid bits are stripped and reported; whiteouts (".wh.NAME", an
// opaque ".wh..wh..opq") remove what lower layers wrote. Each layer's
// uncompressed content is checked against its digest in the image's config
// (diff_ids), and the image goes into the store through Store.Create, so a
// failed or interrupted pull keeps nothing. Plain http is refused unless
// asked for (Options.Insecure), and then only to a loopback registry.
//
// The rootfs's meta.json records the image (rootfs.Image: reference,
// manifest digest, config digest, platform); its Python is the python3 the
// sandbox's PATH finds in the tree, and a tree without one the runner runs
// on (rootfs.MinPython) is argv-only.
package oci
