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
)

// NamespaceKinds are the namespaces a sandboxed process must have of its own.
var NamespaceKinds = [...]string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}

// Namespaces reads /proc/<pid>/ns/* links ("self" for this process).
func Namespaces(pid string) (map[string]string, error) {
	ns := make(map[string]string, len(NamespaceKinds))
	for _, k := range NamespaceKinds {
		l, err := os.Readlink("/proc/" + pid + "/ns/" + k)
		if err != nil {
			return nil, err
		}
		ns[k] = l
	}
	return ns, nil
}

// Status parses /proc/<pid>/status into its fields, values trimmed.
func Status(pid int) (map[string]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
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
	// Foreign are namespace sets (Namespaces) it must share nothing with.
	Foreign []map[string]string
}

// Sandboxed checks pid against w: its credentials, capabilities,
// no_new_privs, seccomp, thread count, id maps, cgroup and that none of its
// namespaces is one of w.Foreign's.
func Sandboxed(pid int, w Want) error {
	st, err := Status(pid)
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
	for _, f := range []string{"uid_map", "gid_map"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			return err
		}
		if got, want := fields(string(b)), fmt.Sprintf("%d %d 1", w.SandboxUID, w.HostID); got != want {
			return fmt.Errorf("%s is %q, want %q", f, got, want)
		}
	}
	ns, err := Namespaces(strconv.Itoa(pid))
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
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err
	}
	if !bytes.Contains(cg, []byte("/"+w.Cgroup+"\n")) {
		return fmt.Errorf("the child is not in its cgroup %s: %s", w.Cgroup, bytes.TrimSpace(cg))
	}
	return nil
}
