package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// supervisorDir is the leaf this process moves itself into on v2 when its own
// cgroup must stop holding processes so controllers can be delegated below it.
const supervisorDir = "supervisor"

// Limits are the resource limits of one sandbox. A zero field is unlimited.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
	// Background gives the cgroup the least CPU weight (v1 cpu.shares 2,
	// v2 cpu.weight 1) until Foreground: its processes run on what the
	// others leave (a pool's sandbox, made ahead of any run, yields to the
	// runs). Not a limit: alone on a CPU it gets the whole CPU.
	Background bool
}

// Manager creates sandbox cgroups under <own cgroup>/<name> in every
// hierarchy it uses. It is safe for concurrent use.
type Manager struct {
	name string
	mode Mode
	v2   bool
	// parent maps a controller to the <own>/<name> directory of its
	// hierarchy; on v2 the single key is "".
	parent map[string]string
	// hier lists the distinct parent directories (v1: co-mounted
	// controllers share one), in a fixed order.
	hier []string
	// v2ctrl lists the v2 controllers enabled for sandboxes.
	v2ctrl []string
}

// NewManager prepares the parent of all sandbox cgroups of this process.
// name is a single path element; sandbox cgroups live under
// <this process's own cgroup>/<name>/<id> in every hierarchy used.
//
// On v2, when the own cgroup holds processes (the "no internal processes"
// rule makes enabling controllers fail with EBUSY), this process moves itself
// into <own>/supervisor first.
func NewManager(name string) (*Manager, error) {
	if err := validName(name); err != nil {
		return nil, fmt.Errorf("cgroup manager %q: %w", name, err)
	}
	l, err := LocateSelf()
	if err != nil {
		return nil, err
	}
	return newManager(name, l)
}

// newManager sets up a Manager for the layout l.
func newManager(name string, l Layout) (*Manager, error) {
	m := &Manager{name: name, mode: l.Mode, parent: make(map[string]string)}
	switch l.Mode {
	case ModeV2:
		if l.Unified == "" {
			return nil, fmt.Errorf("cgroup v2: own cgroup not found under the cgroup2 mount: %w", ErrUnavailable)
		}
		m.v2 = true
		parent, ctrl, err := setupV2(l.Unified, name)
		if err != nil {
			return nil, err
		}
		m.v2ctrl = ctrl
		m.parent[""] = parent
		m.hier = []string{parent}
	case ModeV1, ModeHybrid:
		for _, c := range v1Controllers {
			own, ok := l.V1[c]
			if !ok {
				continue
			}
			parent := filepath.Join(own, name)
			m.parent[c] = parent
			if slices.Contains(m.hier, parent) {
				continue
			}
			if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
			}
			m.hier = append(m.hier, parent)
		}
		if len(m.hier) == 0 {
			return nil, fmt.Errorf("cgroup v1: none of %v mounted: %w", v1Controllers, ErrUnavailable)
		}
	default:
		return nil, ErrUnavailable
	}
	return m, nil
}

// LocateSelf reads /proc/self/mountinfo and /proc/self/cgroup and returns
// where this process's cgroups are.
func LocateSelf() (Layout, error) {
	mounts, self, err := ReadSelf()
	if err != nil {
		return Layout{}, err
	}
	return Locate(mounts, self), nil
}

// setupV2 makes own/name with memory, pids and cpu delegated to its children
// and returns its path and the controllers enabled.
func setupV2(own, name string) (string, []string, error) {
	if filepath.Base(own) == supervisorDir {
		// An earlier Manager of this process already moved it here.
		own = filepath.Dir(own)
	}
	want, err := v2Wanted(own)
	if err != nil {
		return "", nil, err
	}
	if err := enableV2(own, want); errors.Is(err, unix.EBUSY) {
		sup := filepath.Join(own, supervisorDir)
		if err := os.Mkdir(sup, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", nil, fmt.Errorf("cgroup v2: %w", err)
		}
		if err := writeFile(pathDir(sup), "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
			return "", nil, fmt.Errorf("cgroup v2: move self to %s: %w", sup, err)
		}
		if err := enableV2(own, want); errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("cgroup v2 %s: %w", own, ErrSharedCgroup)
		} else if err != nil {
			return "", nil, fmt.Errorf("cgroup v2: %w", err)
		}
	} else if err != nil {
		return "", nil, fmt.Errorf("cgroup v2: %w", err)
	}
	parent := filepath.Join(own, name)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", nil, fmt.Errorf("cgroup v2: %w", err)
	}
	if err := enableV2(parent, want); err != nil {
		return "", nil, fmt.Errorf("cgroup v2: %w", err)
	}
	return parent, want, nil
}

// v2Wanted returns which of memory, pids and cpu are available in dir.
func v2Wanted(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	defer f.Close()
	avail, err := ParseControllers(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	var want []string
	for _, c := range V2Controllers() {
		if slices.Contains(avail, c) {
			want = append(want, c)
		}
	}
	return want, nil
}

// enableV2 enables the controllers in dir's cgroup.subtree_control unless
// they already are.
func enableV2(dir string, want []string) error {
	f, err := os.Open(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	have, err := ParseControllers(f)
	f.Close()
	if err != nil {
		return err
	}
	var add []string
	for _, c := range want {
		if !slices.Contains(have, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return writeFile(pathDir(dir), "cgroup.subtree_control", strings.Join(add, " "))
}

// Mode returns the host's cgroup layout.
func (m *Manager) Mode() Mode { return m.mode }

// Name returns the manager's name, the directory sandboxes live in.
func (m *Manager) Name() string { return m.name }

// Has reports whether the controller (memory, pids, cpu; on v1 also
// cpuacct, freezer) is usable for sandboxes.
func (m *Manager) Has(controller string) bool {
	if !m.v2 {
		_, ok := m.parent[controller]
		return ok
	}
	return slices.Contains(m.v2ctrl, controller)
}

// Create makes the cgroup of sandbox id with limits l. Swap is disabled:
// on v1 memory.memsw.limit_in_bytes equals the memory limit (when swap
// accounting exists) and memory.swappiness is 0; on v2 memory.swap.max is 0
// and memory.oom.group is 1, so an OOM kills the whole sandbox.
func (m *Manager) Create(id string, l Limits) (*Cgroup, error) {
	if err := validName(id); err != nil {
		return nil, fmt.Errorf("cgroup %q: %w", id, err)
	}
	if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUs < 0 {
		return nil, fmt.Errorf("cgroup %s: negative limit %+v: use 0 for unlimited", id, l)
	}
	c := m.handle(id)
	var made []*dir
	undo := func() {
		for _, d := range made {
			d.closeDir()
			_ = unix.Rmdir(d.path)
		}
	}
	for _, d := range c.hier {
		if err := os.Mkdir(d.path, 0o755); err != nil {
			undo()
			return nil, fmt.Errorf("cgroup %s: %w", id, err)
		}
		made = append(made, d)
		if err := d.openDir(); err != nil {
			undo()
			return nil, fmt.Errorf("cgroup %s: %w", id, err)
		}
	}
	var err error
	if m.v2 {
		err = c.limitV2(l)
	} else {
		err = c.limitV1(l)
	}
	if err != nil {
		undo()
		return nil, fmt.Errorf("cgroup %s: %w", id, err)
	}
	return c, nil
}

// handle returns a Cgroup for id without touching the file system; its
// leaves are reached by path.
func (m *Manager) handle(id string) *Cgroup {
	c := &Cgroup{id: id, v2: m.v2, dir: make(map[string]*dir, len(m.parent))}
	for _, p := range m.hier {
		c.hier = append(c.hier, pathDir(filepath.Join(p, id)))
	}
	for ctrl, p := range m.parent {
		c.dir[ctrl] = c.hier[slices.Index(m.hier, p)]
	}
	return c
}

// Leftovers returns the ids of existing sandbox cgroups under the manager's
// parent, in any hierarchy: what a crashed predecessor left behind.
func (m *Manager) Leftovers() ([]string, error) {
	var ids []string
	for _, p := range m.hier {
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("cgroup leftovers: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() && !slices.Contains(ids, e.Name()) {
				ids = append(ids, e.Name())
			}
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Pids lists the processes in the sandbox cgroup id (typically a leftover).
func (m *Manager) Pids(id string) ([]int, error) {
	if err := validName(id); err != nil {
		return nil, fmt.Errorf("cgroup %q: %w", id, err)
	}
	return m.handle(id).Pids()
}

// Remove kills everything in the sandbox cgroup id (typically a leftover)
// and deletes it.
func (m *Manager) Remove(id string) error {
	if err := validName(id); err != nil {
		return fmt.Errorf("cgroup %q: %w", id, err)
	}
	c := m.handle(id)
	kerr := c.Kill()
	derr := c.Delete()
	return errors.Join(kerr, derr)
}

// Dirs returns the directories of the sandbox cgroup id, one per
// hierarchy, whether or not they exist (for diagnostics and tests).
func (m *Manager) Dirs(id string) []string {
	var out []string
	for _, p := range m.hier {
		out = append(out, filepath.Join(p, id))
	}
	return out
}

// RemoveIdle deletes the sandbox cgroup id when no process is in it and
// none of its directories changed in the last idle, and reports whether it
// did. It never kills: the kernel refuses to remove a cgroup a process has
// entered since (EBUSY), and then the cgroup stays. It is for a cgroup no
// engine names (its liveness lock is gone with its engine's run dir).
func (m *Manager) RemoveIdle(id string, idle time.Duration) (bool, error) {
	if err := validName(id); err != nil {
		return false, fmt.Errorf("cgroup %q: %w", id, err)
	}
	c := m.handle(id)
	for _, d := range c.hier {
		var st unix.Stat_t
		if err := unix.Stat(d.path, &st); err != nil {
			if err == unix.ENOENT {
				continue
			}
			return false, fmt.Errorf("cgroup %s: %w", id, err)
		}
		// cgroupfs sets a directory's mtime when it is made and when an
		// entry is added to it or removed.
		if time.Since(time.Unix(st.Mtim.Unix())) < idle {
			return false, nil
		}
	}
	if pids, err := c.Pids(); err != nil || len(pids) > 0 {
		return false, err
	}
	for _, d := range c.hier {
		if err := unix.Rmdir(d.path); err != nil && err != unix.ENOENT {
			return false, fmt.Errorf("cgroup %s: remove %s: %w", id, d.path, err)
		}
	}
	return true, nil
}

// Close removes the manager's parent directory in every hierarchy. It fails
// when sandbox cgroups are still there; on v2 this process stays in
// <own>/supervisor.
func (m *Manager) Close() error {
	var errs []error
	for _, p := range m.hier {
		if err := unix.Rmdir(p); err != nil && err != unix.ENOENT {
			errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func validName(s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") || len(s) > 255 {
		return ErrInvalidName
	}
	return nil
}
