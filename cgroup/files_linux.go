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

// writeFile writes value to dir/name with one write(2), as cgroup files want.
func writeFile(dir, name, value string) error {
	p := filepath.Join(dir, name)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "write " + strconv.Quote(value) + " to", Path: p, Err: err}
	}
	return nil
}

// small is room for a cgroup file of a few lines; every file the stats
// read fits, so reading one allocates nothing.
type small [256]byte

// readFile appends the content of dir/name to buf. It is os.ReadFile
// without an os.File (its fstat, its poller registration, its
// allocations): a sandbox's life reads ~15 cgroup files.
func readFile(dir, name string, buf []byte) ([]byte, error) {
	p := filepath.Join(dir, name)
	var fd int
	var err error
	for {
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: p, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readInt reads a file holding one integer; "max" reads as -1.
func readInt(dir, name string) (int64, error) {
	var a small
	b, err := readFile(dir, name, a[:0])
	if err != nil {
		return 0, err
	}
	b = bytes.TrimSpace(b)
	if string(b) == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", filepath.Join(dir, name), string(b), ErrMalformed)
	}
	return v, nil
}

// readPids reads cgroup.procs.
func readPids(dir string) ([]int, error) {
	var a small
	b, err := readFile(dir, "cgroup.procs", a[:0])
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

func fileExists(dir, name string) bool {
	var st unix.Stat_t
	return unix.Stat(filepath.Join(dir, name), &st) == nil
}
