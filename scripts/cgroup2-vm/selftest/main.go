// Command selftest checks, inside the cgroup2 test VM, the kernel features
// nsbox's cgroup v2 code relies on: a pure cgroup2 hierarchy with the memory,
// pids and cpu controllers, CLONE_INTO_CGROUP, memory.max enforcement seen in
// memory.events, memory.peak, cgroup.kill, user namespaces and pivot_root.
//
// It runs as root in whatever cgroup it is started in: the root cgroup, or a
// delegated subtree (systemd Delegate=yes style), where it first moves itself
// into a leaf so that controllers can be enabled for its children.
// It prints one line per check and exits non-zero if any check fails.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	cgroupRoot        = "/sys/fs/cgroup"
	cgroup2SuperMagic = 0x63677270
	childMemoryMax    = 32 << 20
	childAlloc        = 64 << 20
)

func main() {
	if len(os.Args) > 1 {
		// Re-exec roles of the child processes.
		switch os.Args[1] {
		case "alloc":
			os.Exit(alloc())
		case "block":
			_, _ = os.Stdin.Read(make([]byte, 1))
			os.Exit(0)
		case "userns":
			os.Exit(report(inUserns(os.Args[2])))
		case "pivot":
			os.Exit(report(pivot("mntns", os.Args[2])))
		}
	}
	os.Exit(run())
}

func report(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type check struct {
	name string
	fn   func(*env) error
}

// env is the state the checks share: the cgroup they create children in.
type env struct {
	base string // absolute path of the cgroup under which test cgroups are made
}

func run() int {
	if os.Geteuid() != 0 {
		fmt.Println("selftest: requires root")
		return 2
	}
	e := &env{}
	checks := []check{
		{"cgroup2-mounted", checkCgroup2},
		{"root-controllers", checkRootControllers},
		{"setup-base", (*env).setupBase},
		{"oom-in-child-cgroup", checkOOM},
		{"cgroup-kill", checkKill},
		{"userns-pidns-mntns", checkUserns},
		{"pivot-root-mntns", checkPivot},
	}
	var passed, failed int
	for _, c := range checks {
		start := time.Now()
		if err := c.fn(e); err != nil {
			failed++
			fmt.Printf("FAIL %s: %v\n", c.name, err)
			continue
		}
		passed++
		fmt.Printf("ok   %s (%s)\n", c.name, time.Since(start).Round(time.Millisecond))
	}
	if e.base != "" {
		_ = syscall.Rmdir(e.base)
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

func checkCgroup2(*env) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(cgroupRoot, &st); err != nil {
		return err
	}
	if st.Type != cgroup2SuperMagic {
		return fmt.Errorf("%s has fs magic %#x, want cgroup2 %#x", cgroupRoot, st.Type, cgroup2SuperMagic)
	}
	return nil
}

func checkRootControllers(*env) error {
	b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(b))
	for _, want := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(have, want) {
			return fmt.Errorf("root cgroup.controllers %q lacks %s", have, want)
		}
	}
	return nil
}

// ownCgroup returns this process's cgroup v2 path, e.g. "/" or
// "/system.slice/nsbox.service".
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 entry in /proc/self/cgroup: %q", b)
}

// setupBase makes the cgroup the test cgroups go under, with memory, pids and
// cpu enabled for its children. In a delegated (non-root) cgroup this process
// first moves itself into a leaf, as the no-internal-processes rule demands.
func (e *env) setupBase() error {
	own, err := ownCgroup()
	if err != nil {
		return err
	}
	fmt.Printf("     own cgroup %s\n", own)
	dir := filepath.Join(cgroupRoot, own)
	if own != "/" {
		leaf := filepath.Join(dir, "supervisor")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), "0"); err != nil {
			return fmt.Errorf("move self into leaf: %w", err)
		}
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids +cpu"); err != nil {
		return fmt.Errorf("enable controllers in %s: %w", dir, err)
	}
	e.base = filepath.Join(dir, fmt.Sprintf("nsbox-selftest-%d", os.Getpid()))
	if err := os.Mkdir(e.base, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(e.base, "cgroup.subtree_control"), "+memory +pids +cpu"); err != nil {
		return fmt.Errorf("enable controllers in %s: %w", e.base, err)
	}
	return nil
}

// child makes a test cgroup under the base and returns its path and an open
// fd for CLONE_INTO_CGROUP.
func (e *env) child(name string) (string, *os.File, error) {
	if e.base == "" {
		return "", nil, errors.New("no base cgroup (setup-base failed)")
	}
	dir := filepath.Join(e.base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		_ = syscall.Rmdir(dir)
		return "", nil, err
	}
	return dir, f, nil
}

func removeCgroup(dir string, f *os.File) {
	f.Close()
	for range 50 { // the last task may still be exiting
		if err := syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("     warning: could not remove %s\n", dir)
}

func intoCgroup(cmd *exec.Cmd, f *os.File) {
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
}

func checkOOM(e *env) error {
	dir, f, err := e.child("oom")
	if err != nil {
		return err
	}
	defer removeCgroup(dir, f)
	if err := writeFile(filepath.Join(dir, "memory.max"), strconv.Itoa(childMemoryMax)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "memory.swap.max"), "0"); err != nil {
		return err
	}
	cmd := exec.Command("/proc/self/exe", "alloc")
	intoCgroup(cmd, f)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("child allocating %d MiB under memory.max %d MiB: want SIGKILL, got %v",
			childAlloc>>20, childMemoryMax>>20, err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("child: want SIGKILL, got %v", err)
	}
	ev, err := keyed(filepath.Join(dir, "memory.events"))
	if err != nil {
		return err
	}
	if ev["oom_kill"] < 1 {
		return fmt.Errorf("memory.events oom_kill = %d, want >= 1 (%v)", ev["oom_kill"], ev)
	}
	peak, err := readInt(filepath.Join(dir, "memory.peak"))
	if err != nil {
		return err
	}
	// The peak may pass memory.max by a page or so: a charge lands before
	// reclaim and the OOM killer catch up.
	if peak < childMemoryMax/2 || peak > childMemoryMax+1<<20 {
		return fmt.Errorf("memory.peak = %d, want about memory.max %d", peak, childMemoryMax)
	}
	fmt.Printf("     oom_kill=%d memory.peak=%d\n", ev["oom_kill"], peak)
	return nil
}

func alloc() int {
	b := make([]byte, childAlloc)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Println("alloc: survived, memory.max not enforced")
	return 0
}

func checkKill(e *env) error {
	dir, f, err := e.child("kill")
	if err != nil {
		return err
	}
	defer removeCgroup(dir, f)
	var cmds []*exec.Cmd
	var pipes []*os.File
	defer func() {
		for _, p := range pipes {
			p.Close()
		}
	}()
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		pipes = append(pipes, r, w)
		cmd := exec.Command("/proc/self/exe", "block")
		cmd.Stdin = r
		intoCgroup(cmd, f)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start into cgroup: %w", err)
		}
		cmds = append(cmds, cmd)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
		if err != nil {
			return err
		}
		want := "0::" + strings.TrimPrefix(dir, cgroupRoot) + "\n"
		if string(b) != want {
			return fmt.Errorf("child %d cgroup %q, want %q (CLONE_INTO_CGROUP)", cmd.Process.Pid, b, want)
		}
	}
	if err := writeFile(filepath.Join(dir, "cgroup.kill"), "1"); err != nil {
		return err
	}
	for _, cmd := range cmds {
		err := cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			return fmt.Errorf("child %d after cgroup.kill: want SIGKILL, got %v", cmd.Process.Pid, err)
		}
	}
	return nil
}

// newRootDir makes an empty directory for a child to mount its new root on.
func newRootDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "nsbox-selftest-root-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.Remove(dir) }, nil
}

func checkUserns(*env) error {
	dir, cleanup, err := newRootDir()
	if err != nil {
		return err
	}
	defer cleanup()
	cmd := exec.Command("/proc/self/exe", "userns", dir)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}},
		// Become the namespace's root (host uid 100000), not host root
		// shown as the overflow uid.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("child in new user/mount/pid namespaces: %w", err)
	}
	return nil
}

// inUserns runs in the child: uid 0 mapped to 100000, pid 1, and it can
// pivot_root onto a tmpfs in its own mount namespace.
func inUserns(newRoot string) error {
	if uid, pid := os.Getuid(), os.Getpid(); uid != 0 || pid != 1 {
		return fmt.Errorf("userns child: uid %d pid %d, want 0 and 1", uid, pid)
	}
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return err
	}
	if f := strings.Fields(string(b)); len(f) != 3 || f[1] != "100000" {
		return fmt.Errorf("uid_map %q, want 0 100000 65536", b)
	}
	return pivot("userns", newRoot)
}

func checkPivot(*env) error {
	dir, cleanup, err := newRootDir()
	if err != nil {
		return err
	}
	defer cleanup()
	cmd := exec.Command("/proc/self/exe", "pivot", dir)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("child in a new mount namespace: %w", err)
	}
	return nil
}

// pivot makes / private, mounts a tmpfs, pivot_roots into it and detaches
// the old root. It must run in its own mount namespace.
func pivot(tag, newRoot string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("%s: make / private: %w", tag, err)
	}
	if err := syscall.Mount("tmpfs", newRoot, "tmpfs", 0, "size=1m"); err != nil {
		return fmt.Errorf("%s: mount tmpfs: %w", tag, err)
	}
	if err := os.WriteFile(filepath.Join(newRoot, "marker"), []byte(tag), 0o644); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(newRoot, ".old"), 0o700); err != nil {
		return err
	}
	if err := syscall.PivotRoot(newRoot, filepath.Join(newRoot, ".old")); err != nil {
		return fmt.Errorf("%s: pivot_root: %w", tag, err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return err
	}
	if err := syscall.Unmount("/.old", syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("%s: detach old root: %w", tag, err)
	}
	if b, err := os.ReadFile("/marker"); err != nil || string(b) != tag {
		return fmt.Errorf("%s: after pivot_root /marker = %q, %v", tag, b, err)
	}
	return nil
}

func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", s, path, err)
	}
	return nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// keyed parses a flat-keyed cgroup file ("key value" lines).
func keyed(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m[k] = n
	}
	return m, nil
}
