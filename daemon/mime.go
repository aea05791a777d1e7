package daemon

import "github.com/nsbox/nsbox/daemon/wire"

// MimeOf guesses a file's type from its extension, then its content.
func MimeOf(p string, content []byte) string { return wire.Mime(p, content) }
