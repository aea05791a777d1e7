package importer

import "errors"

// ErrBadSource means an import source is neither a directory nor a tar archive.
var ErrBadSource = errors.New("import source must be a directory, a .tar or a .tar.gz")
