// Package volume is the daemon's store of named volumes: each an ext4
// image of its size cap under <state_dir>/volumes/NAME/, reserved whole
// on the host (reserve), attached to
// a loop device (autoclear) and mounted at <run_dir>/volumes/NAME while
// the daemon runs. Sandboxes get idmapped clones of that mount
// (container.Mount); the file API goes through package workspace's
// fd-based, no-symlink-following operations on its root.
package volume

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/workspace"
)

// Size bounds of a volume. Below 16 MiB ext4's own metadata is a large
// share of the image; above 1 TiB is more than a sandbox volume is for.
const (
	MinSize = 16 << 20
	MaxSize = 1 << 40
)

// MaxCount bounds the volumes of one daemon: each holds a loop device, a
// host-wide resource, while the daemon runs.
const MaxCount = 64

// imageName is the image file in a volume's state directory, and
// ownerName the file beside it holding the uid that created the volume.
const (
	imageName = "volume.ext4"
	ownerName = "owner"
)

// NoOwner is the owner of a volume made by a trusted in-process caller,
// or by a daemon from before volumes had owners: every caller may use it.
const NoOwner = -1

// Access says whether a caller may see and use a volume of owner; a nil
// Access allows every volume. A volume refused is not found, as if it
// did not exist.
type Access func(owner int64) bool

func (a Access) allows(owner int64) bool { return a == nil || a(owner) }

// Info describes a volume.
type Info struct {
	Name      string
	SizeBytes int64 // the cap: the image's size
	UsedBytes int64 // what its filesystem uses (statfs)
	InUse     int   // live sandboxes that mount it
	Owner     int64 // the uid that created it, or NoOwner
	// ReadOnly: mounted read-only because its image (sparse, from a
	// daemon before reservations) could not be reserved whole at start.
	ReadOnly bool
}

// Store keeps the volumes of one daemon.
type Store struct {
	state string // <state_dir>/volumes: images
	run   string // <run_dir>/volumes: mount points
	log   *slog.Logger
	// owner is the uid and gid that own volumes' files on disk
	// (DefaultOwnerID unless chosen): every sandbox sees them as its own
	// user's (uid 1000) through its idmapped mount, and the file API
	// creates files with it.
	owner int

	maxCount int // MaxCount; tests lower it

	mu   sync.Mutex
	vols map[string]*vol
}

type vol struct {
	name     string
	size     int64
	owner    int64 // the uid that created it
	disk     int   // the uid and gid owning its files on disk
	users    int
	readOnly bool // its image could not be reserved at start
}

// Open is OpenOwned with DefaultOwnerID.
func Open(stateDir, runDir string, log *slog.Logger) (*Store, error) {
	return OpenOwned(stateDir, runDir, DefaultOwnerID, log)
}

// OpenOwned makes the store's directories (root-only) and mounts every
// volume found in stateDir/volumes, replacing a mount a dead predecessor
// left at its mount point; files on its volumes are owned on disk by
// owner (ValidOwnerID), and a volume whose files another id owns (uid
// 1000 before owners were chosen, or an earlier choice) is moved to it
// (adopt). A volume that cannot be mounted is logged and left out.
func OpenOwned(stateDir, runDir string, owner int, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := ValidOwnerID(owner); err != nil {
		return nil, fmt.Errorf("volumes: on-disk owner %w", err)
	}
	s := &Store{state: filepath.Join(stateDir, "volumes"), run: filepath.Join(runDir, "volumes"), log: log, owner: owner, vols: map[string]*vol{}, maxCount: MaxCount}
	for _, d := range []string{s.state, s.run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("volumes: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("volumes: %w", err)
		}
	}
	entries, err := os.ReadDir(s.state)
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || ValidName(name) != nil {
			continue
		}
		st, err := os.Stat(s.image(name))
		if err != nil {
			log.Warn("volume without an image, skipped", "volume", name, "err", err)
			continue
		}
		owner, err := readOwner(filepath.Join(s.state, name, ownerName))
		if err != nil {
			log.Error("volume not mounted: its owner file is unreadable", "volume", name, "err", err)
			continue
		}
		if owner == NoOwner {
			log.Warn("volume without an owner (made before volumes had owners): every caller of the socket may use it", "volume", name)
		}
		ro := false
		if err := reserveImage(s.image(name), st.Size()); err != nil {
			// Made sparse by a daemon from before reservations (or holes
			// punched since), and the disk cannot hold it now: its data
			// stays readable, and no write can be lost.
			log.Error("volume mounted read-only: its image cannot be reserved whole on the host's disk; free space and restart the daemon", "volume", name, "size_bytes", st.Size(), "err", err)
			ro = true
		}
		if err := s.mount(name, ro); err != nil {
			log.Error("volume not mounted", "volume", name, "err", err)
			continue
		}
		disk, moved, err := adopt(s.Path(name), s.owner)
		if err != nil {
			// Its files keep the owner they have: sandboxes see them
			// as their own through it still.
			log.Error("volume's files not all moved to the on-disk owner; moved again at the next start", "volume", name, "owner_id", s.owner, "kept", disk, "moved", moved, "err", err)
		} else if moved > 0 {
			log.Info("volume's files moved to the on-disk owner", "volume", name, "owner_id", s.owner, "files", moved)
		}
		s.vols[name] = &vol{name: name, size: st.Size(), owner: owner, disk: disk, readOnly: ro}
	}
	return s, nil
}

// OwnerID is the uid and gid that own the store's new volumes' files on
// disk.
func (s *Store) OwnerID() int { return s.owner }

// ValidName checks a volume name: the rootfs name rule (1 to 63 of a-z,
// 0-9, '.', '_' and '-', starting with a letter or digit).
func ValidName(name string) error { return container.ValidMountName(name) }

func (s *Store) image(name string) string { return filepath.Join(s.state, name, imageName) }

// Path is where volume name is mounted on the host while the daemon runs.
func (s *Store) Path(name string) string { return filepath.Join(s.run, name) }

// readOwner reads a volume's owner file; a missing one is NoOwner.
func readOwner(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return NoOwner, nil
	}
	if err != nil {
		return 0, err
	}
	uid, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return int64(uid), nil
}

// writeOwner records owner durably before the volume exists.
func writeOwner(p string, owner int64) error {
	if owner == NoOwner {
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d\n", owner)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Create makes a volume of size bytes (rounded up to 4 KiB), owned by
// owner (a uid, or NoOwner), and mounts it. Names are one namespace for
// all owners: a name another owner holds is taken.
func (s *Store) Create(name string, size, owner int64) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, fmt.Errorf("%w: volume %w", ErrInvalid, err)
	}
	if size < MinSize || size > MaxSize {
		return Info{}, fmt.Errorf("%w: size_bytes %d: must be between %d (16 MiB) and %d (1 TiB)", ErrInvalid, size, int64(MinSize), int64(MaxSize))
	}
	size = (size + 4095) &^ 4095
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vols[name]; ok {
		return Info{}, fmt.Errorf("volume %s: %w", name, ErrExists)
	}
	if err := s.roomLocked(name, size); err != nil {
		return Info{}, err
	}
	dir := filepath.Join(s.state, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return Info{}, fmt.Errorf("volume %s: %w (a leftover directory %s is in the way)", name, ErrExists, dir)
		}
		return Info{}, fmt.Errorf("volume %s: %w", name, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if err := writeOwner(filepath.Join(dir, ownerName), owner); err != nil {
		return Info{}, fmt.Errorf("volume %s: %w", name, err)
	}
	if err := mkfs(s.image(name), size, s.owner); err != nil {
		if errors.Is(err, ErrNoSpace) {
			os.Remove(s.image(name)) // what fallocate took before it failed
			free, _ := s.free()
			return Info{}, s.noSpace(name, size, free)
		}
		return Info{}, fmt.Errorf("volume %s: %w", name, err)
	}
	if err := s.mount(name, false); err != nil {
		return Info{}, fmt.Errorf("volume %s: %w", name, err)
	}
	// ext4's lost+found belongs to root: the sandbox would see an
	// unreadable directory it cannot remove. fsck makes it again if needed.
	os.Remove(filepath.Join(s.Path(name), "lost+found"))
	ok = true
	s.vols[name] = &vol{name: name, size: size, owner: owner, disk: s.owner}
	s.log.Info("volume created", "volume", name, "size_bytes", size, "owner", owner)
	return s.infoLocked(s.vols[name]), nil
}

// roomLocked refuses a volume of size when the store has MaxCount
// volumes, or when the filesystem under the store has less than size
// free: the image is reserved whole at create (reserve), so the check is
// against the space free now, and fallocate makes the last word.
func (s *Store) roomLocked(name string, size int64) error {
	if len(s.vols) >= s.maxCount {
		return fmt.Errorf("volume %s: %w: the daemon has %d volumes, its maximum (each holds a loop device); delete one (nsbox volume rm)", name, ErrNoSpace, len(s.vols))
	}
	free, err := s.free()
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	if size > free {
		return s.noSpace(name, size, free)
	}
	return nil
}

// free is what the filesystem under the store has free for its images.
func (s *Store) free() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.state, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

func (s *Store) noSpace(name string, size, free int64) error {
	return fmt.Errorf("volume %s of %d bytes: %w: the filesystem of %s has %d bytes free, and a volume's image is reserved whole on the host; choose a smaller size or free space", name, size, ErrNoSpace, s.state, free)
}

// mkfs makes an image of size bytes, reserved whole on the host
// (reserve), with an ext4 filesystem whose root belongs to owner: no
// journal (a volume is scratch space that survives restarts, not a
// database; fsck at mount is cheap at these sizes), no blocks reserved
// for root (the cap is the sandbox's). mkfs.ext4 punches holes in a
// regular file where it zeroes (64 KiB of a new image), so the image is
// reserved again after it; and its inode tables are declared zeroed
// (they are: reserved blocks read as zeros), or ext4's lazy init would
// zero them at the first mount through the loop device, whose zeroing
// punches holes in the image too.
func mkfs(img string, size int64, owner int) error {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return fmt.Errorf("%w: no mkfs.ext4 (apt-get install e2fsprogs; nsbox doctor checks it)", ErrNoTools)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("%w: no loop devices, %v (modprobe loop; nsbox doctor checks it)", ErrNoTools, err)
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := reserve(f, size); err != nil {
		return err
	}
	opts := fmt.Sprintf("root_owner=%d:%d,nodiscard,assume_storage_prezeroed=1", owner, owner)
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", "-E", opts, img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return reserve(f, size)
}

// reserve allocates every block of f's first size bytes on the host
// (fallocate mode 0: holes are filled, data kept; blocks already there
// cost nothing). A sparse image lies: its loop device's writes fail
// once the host's disk is full, after the sandbox's write(2) and sync()
// said yes ("lost async page write"). Reserved, the volume's own
// filesystem is the only one that can say ENOSPC, and it says it to the
// writer. On ext4 a reservation is extent metadata: ~1 ms for 1 GiB.
func reserve(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	switch {
	case errors.Is(err, unix.ENOSPC):
		return ErrNoSpace
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: the filesystem under %s cannot reserve a volume's space (fallocate: %v); put the state directory on ext4, xfs or btrfs", ErrNoTools, filepath.Dir(f.Name()), err)
	case err != nil:
		return fmt.Errorf("reserve %d bytes for %s: %w", size, f.Name(), err)
	}
	return nil
}

// reserveImage reserves an existing image whole (reserve) if it has
// holes: at start, for images a daemon from before reservations left
// sparse, and before each use, for holes a trim of the volume's
// filesystem (fstrim on the host) punched through its loop device. An
// image without holes costs one fstat.
func reserveImage(img string, size int64) error {
	f, err := os.OpenFile(img, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Blocks*512 >= size {
		return nil // reserved already: every block is there
	}
	return reserve(f, size)
}

// List describes every volume access allows, by name.
func (s *Store) List(access Access) []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.vols))
	for _, v := range s.vols {
		if access.allows(v.owner) {
			out = append(out, s.infoLocked(v))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names lists the volumes' names, sorted.
func (s *Store) Names() []string {
	var out []string
	for _, in := range s.List(nil) {
		out = append(out, in.Name)
	}
	return out
}

// Get describes volume name.
func (s *Store) Get(name string, access Access) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.getLocked(name, access)
	if err != nil {
		return Info{}, err
	}
	return s.infoLocked(v), nil
}

// getLocked finds volume name if access allows it: a volume of another
// owner is not found, so its name is all a caller can learn of it (by a
// create that finds the name taken).
func (s *Store) getLocked(name string, access Access) (*vol, error) {
	v, ok := s.vols[name]
	if !ok || !access.allows(v.owner) {
		return nil, s.notFound(name)
	}
	return v, nil
}

func (s *Store) notFound(name string) error {
	return fmt.Errorf("volume %q: %w; create it with POST /v1/volumes {\"name\": %q, \"size_bytes\": N} or `nsbox volume create %s --size 1G`", name, ErrNotFound, name, name)
}

func (s *Store) infoLocked(v *vol) Info {
	in := Info{Name: v.name, SizeBytes: v.size, InUse: v.users, Owner: v.owner, ReadOnly: v.readOnly}
	var st unix.Statfs_t
	if unix.Statfs(s.Path(v.name), &st) == nil {
		in.UsedBytes = int64(st.Blocks-st.Bfree) * st.Bsize
	}
	return in
}

// Delete unmounts and removes a volume that no live sandbox mounts.
func (s *Store) Delete(name string, access Access) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.getLocked(name, access)
	if err != nil {
		return err
	}
	if v.users > 0 {
		return fmt.Errorf("volume %s: %w by %d live sandbox(es); end them first", name, ErrInUse, v.users)
	}
	if err := unmount(s.Path(name)); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	delete(s.vols, name)
	if err := os.RemoveAll(filepath.Join(s.state, name)); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	s.log.Info("volume deleted", "volume", name)
	return nil
}

// Acquire marks volume name in use by one sandbox until release (called
// once the sandbox is gone), and returns its host mount point and the id
// that owns its files on disk (the sandbox's mount maps it to uid 1000).
func (s *Store) Acquire(name string, access Access) (dir string, owner int, release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.getLocked(name, access)
	if err != nil {
		return "", 0, nil, err
	}
	if err := s.reserveLocked(v); err != nil {
		return "", 0, nil, err
	}
	v.users++
	var once sync.Once
	return s.Path(name), v.disk, func() {
		once.Do(func() {
			// Before the use ends, so that a delete waits (409) and
			// Close finds no walk in its mount.
			if !v.readOnly {
				if n, err := stripSetID(s.Path(name)); err != nil {
					s.log.Warn("volume: set-id bits not all stripped", "volume", name, "stripped", n, "err", err)
				} else if n > 0 {
					s.log.Info("volume: set-id bits stripped", "volume", name, "files", n)
				}
			}
			s.mu.Lock()
			v.users--
			s.mu.Unlock()
		})
	}, nil
}

// reserveLocked refills holes punched in v's image since it was
// reserved, refusing the use (ErrNoSpace) when the host's disk cannot
// hold them: a write into a hole would be lost. A read-only volume (not
// reserved at start) has nothing to lose.
func (s *Store) reserveLocked(v *vol) error {
	if v.readOnly {
		return nil
	}
	if err := reserveImage(s.image(v.name), v.size); err != nil {
		if errors.Is(err, ErrNoSpace) {
			free, _ := s.free()
			return fmt.Errorf("volume %s: %w: holes were punched in its image (a trim of its filesystem?) and the filesystem of %s, with %d bytes free, cannot fill them; free space", v.name, ErrNoSpace, s.state, free)
		}
		return fmt.Errorf("volume %s: %w", v.name, err)
	}
	return nil
}

// Files opens volume name's root for the file API: paths resolve beneath
// it and no symlink is ever followed. Close the result after use.
func (s *Store) Files(name string, access Access) (*workspace.Workspace, error) {
	// Held while the root opens: the volume cannot be deleted, and
	// another owner's made under its name, in between.
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.getLocked(name, access)
	if err != nil {
		return nil, err
	}
	if err := s.reserveLocked(v); err != nil {
		return nil, err
	}
	return workspace.OpenDir(s.Path(name), v.disk, v.disk)
}

// Close unmounts every volume (each loop device detaches itself once its
// last mount is gone). Sandboxes must be gone first.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for name := range s.vols {
		if err := unmount(s.Path(name)); err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", name, err))
		}
	}
	s.vols = map[string]*vol{}
	return errors.Join(errs...)
}
