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

func readFile(dir, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, name))
}

// readInt reads a file holding one integer; "max" reads as -1.
func readInt(dir, name string) (int64, error) {
	b, err := readFile(dir, name)
	if err != nil {
		return 0, err
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", filepath.Join(dir, name), s, ErrMalformed)
	}
	return v, nil
}

// readKeyed reads a flat "key value" file (memory.events, cpu.stat, ...).
func readKeyed(dir, name string) (map[string]int64, error) {
	b, err := readFile(dir, name)
	if err != nil {
		return nil, err
	}
	return parseKeyed(b), nil
}

// readPids reads cgroup.procs.
func readPids(dir string) ([]int, error) {
	b, err := readFile(dir, "cgroup.procs")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
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
