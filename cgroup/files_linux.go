package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A dir is a cgroup directory. A sandbox's leaves hold an O_PATH fd of
// theirs from Create to Delete, so that a file in them is opened relative
// to it: a path like /sys/fs/cgroup/memory/<own>/<name>/<id>/memory.stat
// is walked from / once, not on each of the ~25 opens of a sandbox's life
// (v1). Errors still name the whole path.
type dir struct {
	path string
	fd   int // O_PATH|O_DIRECTORY, or -1: open by path
}

// pathDir is a dir reached by its path alone.
func pathDir(p string) *dir { return &dir{path: p, fd: -1} }

func (d *dir) join(name string) string { return filepath.Join(d.path, name) }

// openDir opens the O_PATH fd of d.
func (d *dir) openDir() error {
	fd, err := unix.Open(d.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	d.fd = fd
	return nil
}

// closeDir closes the O_PATH fd of d, if it has one.
func (d *dir) closeDir() {
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

func (d *dir) open(name string, flags int) (int, error) {
	for {
		var fd int
		var err error
		if d.fd >= 0 {
			fd, err = unix.Openat(d.fd, name, flags|unix.O_CLOEXEC, 0)
		} else {
			fd, err = unix.Open(d.join(name), flags|unix.O_CLOEXEC, 0)
		}
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR:
			continue
		}
		return -1, &os.PathError{Op: "open", Path: d.join(name), Err: err}
	}
}

// writeFile writes value to d/name with one write(2), as cgroup files want.
func writeFile(d *dir, name, value string) error {
	fd, err := d.open(name, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "write " + strconv.Quote(value) + " to", Path: d.join(name), Err: err}
	}
	return nil
}

// small is room for a cgroup file of a few lines; every file the stats
// read fits, so reading one allocates nothing.
type small [256]byte

// readFile appends the content of d/name to buf. It is os.ReadFile
// without an os.File (its fstat, its poller registration, its
// allocations): a sandbox's life reads ~15 cgroup files.
func readFile(d *dir, name string, buf []byte) ([]byte, error) {
	fd, err := d.open(name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return ReadAll(fd, d.join(name), buf)
}

// ReadAll appends the rest of fd to buf with read(2) alone: no os.File,
// so no fstat, no poller and no allocation when buf has room. It reads the
// small kernel files on a sandbox's path (cgroup files here, /proc files
// in the engine's verification); path names the file in errors.
func ReadAll(fd int, path string, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readInt reads a file holding one integer; "max" reads as -1.
func readInt(d *dir, name string) (int64, error) {
	var a small
	b, err := readFile(d, name, a[:0])
	if err != nil {
		return 0, err
	}
	b = bytes.TrimSpace(b)
	if string(b) == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", d.join(name), string(b), ErrMalformed)
	}
	return v, nil
}

// readPids reads cgroup.procs.
func readPids(d *dir) ([]int, error) {
	var a small
	b, err := readFile(d, "cgroup.procs", a[:0])
	if err != nil {
		return nil, err
	}
	var out []int
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		if pid, err := strconv.Atoi(string(bytes.TrimSpace(line))); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

func isNotExist(err error) bool { return errors.Is(err, unix.ENOENT) }

func fileExists(d *dir, name string) bool {
	var st unix.Stat_t
	if d.fd >= 0 {
		return unix.Fstatat(d.fd, name, &st, 0) == nil
	}
	return unix.Stat(d.join(name), &st) == nil
}
