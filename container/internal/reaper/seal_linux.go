package reaper

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"
)

// Seal is the binary a run with an init execs as its pid 1: a sealed
// memfd copy of this executable (its constructor is the reaper), made at
// the first such run, so that an engine whose runs never ask pays
// nothing. A memfd, not exeseal's overlay: it is exec'd inside the
// sandbox, after Landlock, which lets a process execute an anonymous file
// but not one on a mount outside its tree. The zero Seal is ready.
type Seal struct {
	once sync.Once
	f    *os.File
	err  error
}

// errNoReaper is a run with an init on a binary built without cgo.
var errNoReaper = errors.New("init: this nsbox was built without cgo and has no minimal init (build it with make build)")

// File returns the sealed copy, made in tmpDir when no memfd can be.
func (s *Seal) File(tmpDir string) (*os.File, error) {
	s.once.Do(func() {
		if !Available {
			s.err = errNoReaper
			return
		}
		s.f, s.err = sealSelf(tmpDir)
	})
	return s.f, s.err
}

// Close closes the copy, if one was made.
func (s *Seal) Close() {
	if s.f != nil {
		s.f.Close()
	}
}

func sealSelf(tmpDir string) (*os.File, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("seal a copy of the nsbox binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("seal a copy of the nsbox binary: %w", err)
	}
	sealed, err := exeseal.CloneBinary(f, st.Size(), Arg0, tmpDir)
	if err != nil {
		return nil, fmt.Errorf("seal a copy of the nsbox binary: %w", err)
	}
	_ = unix.Fchmod(int(sealed.Fd()), 0o555) // exec'd by the sandbox user
	return sealed, nil
}

// Append appends the sealed copy to fds when init is asked for.
func (s *Seal) Append(fds []*os.File, init bool, tmpDir string) ([]*os.File, error) {
	if !init {
		return fds, nil
	}
	f, err := s.File(tmpDir)
	if err != nil {
		return fds, err
	}
	return append(fds, f), nil
}

// Tasks is what an init adds to a sandbox's pids limit: the reaper's one
// task, counted before anything of the user runs.
func Tasks(init bool) int64 {
	if init {
		return 1
	}
	return 0
}
