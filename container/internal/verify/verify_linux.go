// Package verify checks from the host, through /proc, what a sandboxed
// process made of itself: the engine runs it on every zygote child before
// the child gets its run's code, so a child that skipped a step of its own
// set-up (or a forged pid) is refused.
package verify

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
)

// NamespaceKinds are the namespaces a sandboxed process must have of its own.
var NamespaceKinds = [...]string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}

// proc is the /proc directory of one process, opened once: its files are
// opened relative to it, without walking /proc/<pid> again for each, and
// all of them are that process's: once it is gone, a read through the fd
// fails (ESRCH) even if its pid has been reused. Errors name whole paths.
type proc struct {
	path string // /proc/<pid>
	fd   int    // O_PATH|O_DIRECTORY
}

func openProc(pid string) (proc, error) {
	p := proc{path: "/proc/" + pid}
	fd, err := unix.Open(p.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return p, &os.PathError{Op: "open", Path: p.path, Err: err}
	}
	p.fd = fd
	return p, nil
}

func (p proc) close() { unix.Close(p.fd) }

// read appends the content of the file name to buf.
func (p proc) read(name string, buf []byte) ([]byte, error) {
	fd, err := unix.Openat(p.fd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p.path + "/" + name, Err: err}
	}
	defer unix.Close(fd)
	return cgroup.ReadAll(fd, p.path+"/"+name, buf)
}

// Namespaces reads /proc/<pid>/ns/* links ("self" for this process).
func Namespaces(pid string) (map[string]string, error) {
	p, err := openProc(pid)
	if err != nil {
		return nil, err
	}
	defer p.close()
	return p.namespaces()
}

func (p proc) namespaces() (map[string]string, error) {
	ns := make(map[string]string, len(NamespaceKinds))
	var buf [64]byte // "cgroup:[4026531835]"
	for _, k := range NamespaceKinds {
		n, err := unix.Readlinkat(p.fd, "ns/"+k, buf[:])
		if err != nil {
			return nil, &os.PathError{Op: "readlink", Path: p.path + "/ns/" + k, Err: err}
		}
		if n == len(buf) {
			return nil, fmt.Errorf("%s/ns/%s: link longer than %d bytes", p.path, k, len(buf))
		}
		ns[k] = string(buf[:n])
	}
	return ns, nil
}

// Status parses /proc/<pid>/status into its fields, values trimmed.
func Status(pid int) (map[string]string, error) {
	p, err := openProc(strconv.Itoa(pid))
	if err != nil {
		return nil, err
	}
	defer p.close()
	return p.status()
}

func (p proc) status() (map[string]string, error) {
	var buf [4096]byte
	b, err := p.read("status", buf[:0])
	if err != nil {
		return nil, err
	}
	return parseStatus(b), nil
}

func parseStatus(b []byte) map[string]string {
	st := make(map[string]string, 64)
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	return st
}

// fields joins a status value's fields with single spaces.
func fields(v string) string { return strings.Join(strings.Fields(v), " ") }

// Child checks that host pid is the child nspid of a process whose own pid
// namespace is one level below the host's: "pid nspid 1" in NSpid (the
// child is pid 1 of a namespace of its own).
func Child(pid, nspid int) error {
	st, err := Status(pid)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%d %d 1", pid, nspid); fields(st["NSpid"]) != want {
		return fmt.Errorf("host pid %d is not the zygote's child %d: NSpid %q", pid, nspid, st["NSpid"])
	}
	return nil
}

// Want is what a verified process must look like.
type Want struct {
	HostID     int    // its uid and gid on the host, all four of each
	SandboxUID int    // what HostID maps to inside (uid_map, gid_map)
	Cgroup     string // the last element of its cgroup path
	// CgroupLines is how many lines of its /proc/<pid>/cgroup must name
	// Cgroup: every hierarchy the engine uses (at least one).
	CgroupLines int
	// Foreign are namespace sets (Namespaces) it must share nothing with.
	Foreign []map[string]string
}

// Sandboxed checks pid against w: its credentials, capabilities,
// no_new_privs, seccomp, thread count, id maps, cgroup and that none of its
// namespaces is one of w.Foreign's.
func Sandboxed(pid int, w Want) error {
	p, err := openProc(strconv.Itoa(pid))
	if err != nil {
		return err
	}
	defer p.close()
	st, err := p.status()
	if err != nil {
		return err
	}
	id := strconv.Itoa(w.HostID)
	ids := id + " " + id + " " + id + " " + id
	const none = "0000000000000000"
	for _, f := range [...][2]string{
		{"Uid", ids}, {"Gid", ids}, {"Groups", ""},
		{"CapInh", none}, {"CapPrm", none}, {"CapEff", none}, {"CapBnd", none}, {"CapAmb", none},
		{"Seccomp", "2"}, {"NoNewPrivs", "1"}, {"Threads", "1"},
	} {
		if got := fields(st[f[0]]); got != f[1] {
			return fmt.Errorf("%s is %q, want %q", f[0], got, f[1])
		}
	}
	var buf [256]byte
	for _, f := range []string{"uid_map", "gid_map"} {
		b, err := p.read(f, buf[:0])
		if err != nil {
			return err
		}
		if got, want := fields(string(b)), fmt.Sprintf("%d %d 1", w.SandboxUID, w.HostID); got != want {
			return fmt.Errorf("%s is %q, want %q", f, got, want)
		}
	}
	ns, err := p.namespaces()
	if err != nil {
		return err
	}
	for _, k := range NamespaceKinds {
		for _, other := range w.Foreign {
			if ns[k] == other[k] {
				return fmt.Errorf("the child shares its %s namespace (%s) with the zygote or the host", k, ns[k])
			}
		}
	}
	cg, err := p.read("cgroup", buf[:0])
	if err != nil {
		return err
	}
	if n := bytes.Count(cg, []byte("/"+w.Cgroup+"\n")); n == 0 || n < w.CgroupLines {
		return fmt.Errorf("the child is in its cgroup %s in %d of %d hierarchies: %s", w.Cgroup, n, max(1, w.CgroupLines), string(bytes.TrimSpace(cg)))
	}
	return nil
}
