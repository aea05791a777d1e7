package importer

import "errors"

var (
	// ErrBadSource means an import source is neither a directory nor a tar archive.
	ErrBadSource = errors.New("import source must be a directory, a .tar or a .tar.gz")
	// ErrRefused means an image layer has an entry the import's rules do
	// not keep (a ".." name, a device node, a fifo, a write through a
	// symlink, a hard link out of the tree): the image is refused whole
	// (Layers).
	ErrRefused = errors.New("refused")
)
