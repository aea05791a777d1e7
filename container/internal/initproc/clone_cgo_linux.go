//go:build cgo

package initproc

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

enum { MAX_FDS = 16, STACK_SIZE = 64 << 10 };

// Where the child failed, reported with its errno on the error pipe.
enum { ST_MAPS = 1, ST_SETSID, ST_CREDS, ST_FDS, ST_PDEATHSIG, ST_EXEC };

struct nsbox_clone {
	int flags;
	int fds[MAX_FDS];
	int nfds;
	const char *path;
	char **argv, **envp;
	const char *uid_map, *gid_map;
	int pdeathsig;

	// Filled in by nsbox_clone.
	volatile pid_t pid;
	int ready[2], sync[2], err[2];
	int map_errno;
};

static int write_file(pid_t pid, const char *name, const char *data) {
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t n = strlen(data);
	int e = write(fd, data, n) == (ssize_t)n ? 0 : (errno ? errno : EIO);
	close(fd);
	return e;
}

// The mapper writes the child's id maps: the thread that cloned the child
// waits, suspended (CLONE_VFORK), until the child has exec'd.
static void *mapper(void *arg) {
	struct nsbox_clone *c = arg;
	char b;
	if (read(c->ready[0], &b, 1) == 1) {
		c->map_errno = write_file(c->pid, "uid_map", c->uid_map);
		if (!c->map_errno)
			c->map_errno = write_file(c->pid, "gid_map", c->gid_map);
		if (!c->map_errno)
			(void)!write(c->sync[1], "g", 1);
	}
	// Without a byte the child sees EOF and gives up.
	close(c->sync[1]);
	return NULL;
}

static void fail(struct nsbox_clone *c, int errfd, int stage) {
	int msg[2] = {stage, errno};
	(void)!write(errfd, msg, sizeof msg);
	_exit(127);
}

// The child shares the parent's memory until execve: it only makes system
// calls, on its own stack, and touches nothing of the parent's but *c.
static int child(void *arg) {
	struct nsbox_clone *c = arg;
	int errfd = c->err[1];
	char b;

	// Signals stay blocked (the parent blocked them all) until their
	// handlers, the parent's, are back to the default. The raw system
	// call reaches glibc's internal signals too; an all-zero kernel
	// sigaction is SIG_DFL whatever the architecture's layout.
	long dfl[8];
	memset(dfl, 0, sizeof dfl);
	for (int s = 1; s < NSIG; s++)
		syscall(SYS_rt_sigaction, s, dfl, NULL, sizeof(sigset_t) < 8 ? sizeof(sigset_t) : 8);

	// Our copies of the parent's ends: the mapper's EOF must come when
	// the mapper closes its end, the parent's (the ready pipe's read end)
	// must be the only one left.
	close(c->sync[1]);
	close(c->ready[0]);
	close(c->err[0]);
	if (write(c->ready[1], "r", 1) != 1 || read(c->sync[0], &b, 1) != 1) {
		errno = c->map_errno ? c->map_errno : EPIPE;
		fail(c, errfd, ST_MAPS);
	}
	if (setsid() < 0)
		fail(c, errfd, ST_SETSID);
	// Raw system calls: glibc's wrappers would signal the parent's threads
	// to change their credentials too.
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, 0, 0, 0) < 0 ||
	    syscall(SYS_setresuid, 0, 0, 0) < 0)
		fail(c, errfd, ST_CREDS);
	// After the credentials, whose change clears it. A parent that died
	// before it was set has closed the ready pipe's read end: EPIPE.
	if (prctl(PR_SET_PDEATHSIG, c->pdeathsig, 0, 0, 0) < 0 || write(c->ready[1], "p", 1) != 1)
		fail(c, errfd, ST_PDEATHSIG);

	// fds[i] becomes fd i: first everything above the range, then down.
	int tmp[MAX_FDS];
	if ((errfd = fcntl(errfd, F_DUPFD_CLOEXEC, c->nfds)) < 0)
		fail(c, c->err[1], ST_FDS);
	for (int i = 0; i < c->nfds; i++)
		if ((tmp[i] = fcntl(c->fds[i], F_DUPFD_CLOEXEC, c->nfds)) < 0)
			fail(c, errfd, ST_FDS);
	for (int i = 0; i < c->nfds; i++)
		if (dup3(tmp[i], i, 0) < 0)
			fail(c, errfd, ST_FDS);
	// Nothing else crosses the exec, whatever the parent left open.
	syscall(SYS_close_range, c->nfds, ~0U, CLOSE_RANGE_CLOEXEC);

	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(c->path, c->argv, c->envp);
	fail(c, errfd, ST_EXEC);
	return 0;
}

// nsbox_clone clones a child in new namespaces (c->flags) with the parent's
// memory (CLONE_VM|CLONE_VFORK: no page tables copied, no copy-on-write
// faults afterwards) and returns once it has exec'd or failed: its pid, or
// -errno when the clone itself failed. *stage and *cerr say where and why
// the child failed; *stage is 0 when it exec'd.
static pid_t nsbox_clone(struct nsbox_clone *c, int *stage, int *cerr) {
	*stage = 0;
	*cerr = 0;
	c->pid = 0;
	c->map_errno = 0;
	if (pipe2(c->ready, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(c->sync, O_CLOEXEC) < 0) {
		int e = errno;
		close(c->ready[0]);
		close(c->ready[1]);
		return -e;
	}
	if (pipe2(c->err, O_CLOEXEC) < 0) {
		int e = errno;
		close(c->ready[0]);
		close(c->ready[1]);
		close(c->sync[0]);
		close(c->sync[1]);
		return -e;
	}
	char *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	pid_t pid = -ENOMEM;
	sigset_t all, old;
	sigfillset(&all);
	// The mapper and the child start with every signal blocked: no Go
	// handler may run on either.
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	int terr = stack == MAP_FAILED ? ENOMEM : pthread_create(&t, NULL, mapper, c);
	if (terr == 0) {
		pid = clone(child, stack + STACK_SIZE, CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD | c->flags,
			    c, &c->pid);
		if (pid < 0)
			pid = -errno;
	} else {
		pid = -terr;
		close(c->sync[1]);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	// The child has exec'd or exited: its ends are closed, and these give
	// the mapper its EOF if the child never wrote.
	close(c->ready[1]);
	close(c->sync[0]);
	close(c->err[1]);
	if (terr == 0)
		pthread_join(t, NULL);
	close(c->ready[0]);
	if (stack != MAP_FAILED)
		munmap(stack, STACK_SIZE);
	if (pid > 0) {
		int msg[2];
		ssize_t n;
		do
			n = read(c->err[0], msg, sizeof msg);
		while (n < 0 && errno == EINTR);
		if (n == sizeof msg) {
			*stage = msg[0];
			*cerr = msg[1];
		}
	}
	close(c->err[0]);
	return pid;
}
*/
import "C"

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"unsafe"
)

// startProcess starts cmd: with vforkStart unless cmd clones into a
// cgroup (v2: CLONE_INTO_CGROUP needs clone3, which glibc does not wrap),
// else with cmd.Start.
func startProcess(cmd *exec.Cmd) (*os.Process, error) {
	if cmd.SysProcAttr.UseCgroupFD {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmd.Process, nil
	}
	return vforkStart(cmd)
}

// vforkStart starts cmd as cmd.Start would, for the SysProcAttr fields an
// init uses (Cloneflags, id maps, Credential 0:0 without groups, Setsid,
// Pdeathsig), but clones with CLONE_VM|CLONE_VFORK: os/exec can't when the
// child gets a new user namespace, because the child must wait for its id
// maps, so it copies the whole engine's page tables and the engine then
// takes copy-on-write faults on its own heap. Here the cloning thread
// waits, suspended, while a helper thread writes the maps. As with
// cmd.Start, the child inherits the cloning thread's cgroups.
func vforkStart(cmd *exec.Cmd) (*os.Process, error) {
	a := cmd.SysProcAttr
	if a == nil || a.UseCgroupFD || a.Credential == nil || a.Credential.Uid != 0 || a.Credential.Gid != 0 || len(a.Credential.Groups) != 0 || !a.GidMappingsEnableSetgroups {
		return nil, fmt.Errorf("vfork start: unsupported SysProcAttr %+v", a)
	}
	files := append([]*os.File{asFile(cmd.Stdin), asFile(cmd.Stdout), asFile(cmd.Stderr)}, cmd.ExtraFiles...)
	if len(files) > C.MAX_FDS {
		return nil, fmt.Errorf("vfork start: %d files, at most %d", len(files), C.MAX_FDS)
	}
	var c C.struct_nsbox_clone
	c.flags = C.int(a.Cloneflags)
	c.nfds = C.int(len(files))
	for i, f := range files {
		if f == nil {
			return nil, fmt.Errorf("vfork start: file %d is not an *os.File", i)
		}
		c.fds[i] = C.int(f.Fd())
	}
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	cstr := func(s string) *C.char {
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	cvec := func(ss []string) **C.char {
		v := (**C.char)(C.calloc(C.size_t(len(ss)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
		frees = append(frees, unsafe.Pointer(v))
		s := unsafe.Slice(v, len(ss)+1)
		for i, x := range ss {
			s[i] = cstr(x)
		}
		return v
	}
	c.path = cstr(cmd.Path)
	c.argv = cvec(cmd.Args)
	c.envp = cvec(cmd.Env)
	c.uid_map = cstr(idMap(a.UidMappings))
	c.gid_map = cstr(idMap(a.GidMappings))
	c.pdeathsig = C.int(a.Pdeathsig)
	var stage, cerr C.int
	pid := C.nsbox_clone(&c, &stage, &cerr)
	runtime.KeepAlive(files)
	if pid < 0 {
		return nil, fmt.Errorf("clone: %w", syscall.Errno(-pid))
	}
	proc, err := os.FindProcess(int(pid))
	if err != nil {
		return nil, err // never on Linux
	}
	if stage != 0 {
		proc.Wait()
		return nil, &os.PathError{Op: "start " + cloneStages[stage], Path: cmd.Path, Err: syscall.Errno(cerr)}
	}
	return proc, nil
}

var cloneStages = map[C.int]string{
	C.ST_MAPS: "(id maps)", C.ST_SETSID: "(setsid)", C.ST_CREDS: "(credentials)",
	C.ST_FDS: "(fds)", C.ST_PDEATHSIG: "(parent-death signal)", C.ST_EXEC: "(exec)",
}

func asFile(v any) *os.File {
	f, _ := v.(*os.File)
	return f
}

// idMap is the text of a uid_map or gid_map file.
func idMap(m []syscall.SysProcIDMap) string {
	var b strings.Builder
	for _, e := range m {
		fmt.Fprintf(&b, "%d %d %d\n", e.ContainerID, e.HostID, e.Size)
	}
	return b.String()
}
