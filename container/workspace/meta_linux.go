package workspace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// File metadata (E2B's, as envd keeps it): user.e2b.* extended attributes
// of regular files and directories. The archive carries them as PAX
// records named as GNU tar names them (SCHILY.xattr.NAME), read from the
// fd the archive already holds and set on the fd the extraction created,
// so no path is resolved again and nothing is followed. Only that
// namespace is read or applied: an archive's other records (trusted.*,
// security.*, system.*, any other user.*) are ignored, not refused, so
// neither a hostile archive nor the sandbox that wrote one sets what the
// host trusts. A file's are bounded as envd bounds them (MetaMax, its
// names with their prefix and its values): past it the rest, names in
// order, is left out, as the process agent leaves it out when it reads
// them. On a filesystem that keeps no user xattrs a file is restored
// without them, counted (MetaLost).
const (
	MetaPrefix = "user.e2b."
	MetaMax    = 4096
	paxXattr   = "SCHILY.xattr."
)

// readMeta returns the metadata of fd (a file or directory opened for
// reading, not O_PATH) as PAX records; nil when it has none.
func readMeta(fd int) (map[string]string, error) {
	n, err := unix.Flistxattr(fd, nil) // the list's size: most files have none
	if n <= 0 || errors.Is(err, unix.EOPNOTSUPP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	list := make([]byte, n) // at most XATTR_LIST_MAX (64 KiB)
	n, err = unix.Flistxattr(fd, list)
	if errors.Is(err, unix.ERANGE) { // grew meanwhile: the sandbox is changing it
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	var names []string
	for _, name := range strings.Split(string(list[:n]), "\x00") {
		if metaName(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var recs map[string]string
	size, val := 0, make([]byte, MetaMax)
	for _, name := range names {
		n, err := unix.Fgetxattr(fd, name, val)
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ERANGE) { // removed meanwhile, or past the bound
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %s: %w", name, err)
		}
		if size+len(name)+n > MetaMax {
			continue
		}
		size += len(name) + n
		if recs == nil {
			recs = map[string]string{}
		}
		recs[paxXattr+name] = string(val[:n])
	}
	return recs, nil
}

// metaName says name is a metadata attribute an archive may carry: in
// MetaPrefix's namespace, with a key, and a valid PAX record name.
func metaName(name string) bool {
	return len(name) > len(MetaPrefix) && len(name) <= 255 && strings.HasPrefix(name, MetaPrefix) &&
		!strings.ContainsAny(name, "=\x00")
}

// MetaLost is how many files and directories ReadTar restored without
// their metadata, the filesystem keeping no user xattrs.
func (w *Workspace) MetaLost() int64 { return w.metaLost.Load() }

// applyMeta sets on fd (the file or directory just extracted) the
// metadata among an archive entry's PAX records, bounded as readMeta
// bounds it; every other record is ignored. lost says the filesystem
// keeps no user xattrs, so there were some it could not set.
func applyMeta(fd int, p string, recs map[string]string) (lost bool, err error) {
	var names []string
	for k := range recs {
		if name, ok := strings.CutPrefix(k, paxXattr); ok && metaName(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	size := 0
	for _, name := range names {
		v := recs[paxXattr+name]
		if size+len(name)+len(v) > MetaMax {
			continue
		}
		size += len(name) + len(v)
		err := unix.Fsetxattr(fd, name, []byte(v), 0)
		if errors.Is(err, unix.EOPNOTSUPP) {
			return true, nil
		}
		if errors.Is(err, unix.ENOSPC) {
			return false, fmt.Errorf("set xattr %s of %s: %w", name, p, ErrFull)
		}
		if err != nil {
			return false, fmt.Errorf("set xattr %s of %s: %w", name, p, err)
		}
	}
	return false, nil
}
