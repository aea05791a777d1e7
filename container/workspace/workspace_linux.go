package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Workspace is a size-capped tmpfs that exists only as a detached mount
// (fsopen/fsmount): it is never attached anywhere in the host's mount tree,
// so a crash cannot leave it mounted, and the engine reaches its files only
// through the mount's fd, beneath it, without following symlinks.
type Workspace struct {
	mnt *os.File // owns fd; handed to the sandbox (Mount)
	fd  int      // O_PATH fd of the detached mount's root
	uid int      // host uid/gid owning new files (the sandbox user)
	gid int
	// mu is held for reading by every operation and for writing by Close:
	// the sandbox's teardown may close the workspace while a session's
	// file operation runs in another goroutine, and an fd closed under
	// that operation could be reused for another file (another sandbox's
	// workspace) before its next openat2.
	mu sync.RWMutex
	// metaLost counts the files ReadTar restored without their metadata.
	metaLost atomic.Int64
}

// hold takes the workspace for one operation (release with w.mu.RUnlock).
func (w *Workspace) hold() error {
	w.mu.RLock()
	if w.mnt == nil {
		w.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// New creates the tmpfs with the given size, owned by uid/gid.
func New(sizeBytes int64, uid, gid int) (*Workspace, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	opts := [][2]string{
		{"size", strconv.FormatInt(sizeBytes, 10)},
		{"nr_inodes", strconv.FormatInt(Inodes(sizeBytes), 10)},
		{"mode", "0755"},
		{"uid", strconv.Itoa(uid)},
		{"gid", strconv.Itoa(gid)},
	}
	for _, o := range opts {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return nil, fmt.Errorf("tmpfs option %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("create tmpfs: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOSUID)
	if err != nil {
		return nil, fmt.Errorf("fsmount tmpfs: %w", err)
	}
	return &Workspace{mnt: os.NewFile(uintptr(mfd), "workspace"), fd: mfd, uid: uid, gid: gid}, nil
}

// OpenDir gives the workspace's operations (resolved beneath the root,
// nothing followed, no crossing into another mount) on an existing host
// directory, e.g. a mounted volume's root; files and directories it
// creates are owned by uid/gid. Close closes its fd only.
func OpenDir(dir string, uid, gid int) (*Workspace, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return &Workspace{mnt: os.NewFile(uintptr(fd), dir), fd: fd, uid: uid, gid: gid}, nil
}

// Mount is the detached mount, for handing to the sandbox's init (as an
// SCM_RIGHTS fd). It stays the Workspace's.
func (w *Workspace) Mount() *os.File { return w.mnt }

// Close drops the engine's reference; the tmpfs is freed once the
// sandbox's mount namespace is gone too.
func (w *Workspace) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mnt == nil {
		return nil
	}
	err := w.mnt.Close()
	w.mnt, w.fd = nil, -1
	return err
}

// beneath is the resolution every host-side access to the workspace uses.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

func (w *Workspace) openat(p string, flags uint64, mode uint64) (int, error) {
	return unix.Openat2(w.fd, p, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC | unix.O_NOFOLLOW, Mode: mode, Resolve: beneath})
}

// WriteFile creates or replaces a file, creating parent directories, all
// owned by the sandbox user. Nothing on the way is followed if it is a
// symlink.
func (w *Workspace) WriteFile(p string, data []byte, perm uint32) error {
	_, err := w.WriteFrom(p, bytes.NewReader(data), perm)
	return err
}

func splitPath(p string) []string {
	var out []string
	for p != "" && p != "." {
		d, f := path.Split(p)
		out = append(out, f)
		p = path.Clean(d)
		if p == "/" {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Collect lists the regular files of the workspace that differ from the
// inputs (by sha256), at most MaxListed (truncated says there were more),
// reading inline content for paths matching patterns up to MaxInlineBytes.
// Symlinks and special files are never opened.
func (w *Workspace) Collect(inputs map[string]string, patterns []string) (_ []FileInfo, truncated bool, _ error) {
	if err := w.hold(); err != nil {
		return nil, false, err
	}
	defer w.mu.RUnlock()
	var files []FileInfo
	inline := int64(0)
	var walk func(dir string) error
	walk = func(dir string) error {
		fd, err := w.openat(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", dir, err)
		}
		d := os.NewFile(uintptr(fd), dir)
		entries, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
		for _, e := range entries {
			if truncated {
				return nil
			}
			p := path.Join(dir, e.Name())
			switch {
			case e.Type().IsDir():
				if err := walk(p); err != nil {
					return err
				}
			case e.Type().IsRegular():
				fi, data, err := w.hashFile(p, wantInline(p, patterns), MaxInlineBytes-inline)
				if err != nil {
					return err
				}
				if inputs[fi.Path] == fi.SHA256 {
					continue
				}
				if len(files) == MaxListed {
					truncated = true
					return nil
				}
				inline += int64(len(data))
				fi.Content = data
				files = append(files, fi)
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return nil, false, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, truncated, nil
}

func wantInline(p string, patterns []string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	return false
}

func (w *Workspace) hashFile(p string, inline bool, room int64) (FileInfo, []byte, error) {
	fd, err := w.openat(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return FileInfo{}, nil, fmt.Errorf("open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return FileInfo{}, nil, fmt.Errorf("stat %s: not a regular file (%v)", p, err)
	}
	h := sha256.New()
	var data []byte
	var r io.Reader = f
	if inline && st.Size() <= room {
		data, err = io.ReadAll(f)
		if err != nil {
			return FileInfo{}, nil, fmt.Errorf("read %s: %w", p, err)
		}
		h.Write(data)
	} else if _, err := io.Copy(h, r); err != nil {
		return FileInfo{}, nil, fmt.Errorf("read %s: %w", p, err)
	}
	return FileInfo{
		Path:   path.Clean(p),
		Size:   st.Size(),
		SHA256: hex.EncodeToString(h.Sum(nil)),
		Mode:   uint32(st.Mode().Perm()),
	}, data, nil
}
