//go:build cgo

package reaper

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

// report writes an exec failure as sandboxinit's ParseExecError reads it.
static void report(int fd, int err, const char *what) {
	char msg[4096];
	int n = snprintf(msg, sizeof msg, "exec-failed %d %s", err, what);
	if (n > 0)
		(void)!write(fd, msg, n < (int)sizeof msg ? n : (int)sizeof msg - 1);
}

// The signals a fault raises stay unblocked: blocked, they would loop.
static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};

__attribute__((constructor)) static void nsbox_reaper(int argc, char **argv, char **envp) {
	if (argc < 4 || strcmp(argv[0], "nsbox-reaper") != 0)
		return;
	// Exec'd from /proc/self/fd/N, its name would be "N".
	prctl(PR_SET_NAME, "nsbox-reaper", 0, 0, 0);
	int errfd = atoi(argv[1]);
	const char *path = argv[2];
	char **cmd = argv + 3;

	sigset_t all, old;
	sigfillset(&all);
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
		sigdelset(&all, faults[i]);
	// Blocked, a signal reaches pid 1 even without a handler (the kernel
	// drops only those it would ignore): sigwaitinfo takes them all.
	sigprocmask(SIG_SETMASK, &all, &old);

	pid_t child = fork();
	if (child < 0) {
		report(errfd, errno, "fork");
		_exit(127);
	}
	if (child == 0) {
		// A session of its own, as the command has without the reaper.
		setsid();
		sigprocmask(SIG_SETMASK, &old, NULL);
		fcntl(errfd, F_SETFD, FD_CLOEXEC);
		execve(path, cmd, envp);
		report(errfd, errno, cmd[0]);
		_exit(127);
	}
	// pid 1 keeps no fd: the command's stdio, control socket (3) and
	// error pipe are its alone, so that their other ends see it close them.
	for (int fd = 0; fd <= 3; fd++)
		close(fd);
	close(errfd);

	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&all, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(child, sig);
			continue;
		}
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p != child)
				continue; // an orphan, reaped
			if (WIFSIGNALED(st))
				_exit(128 + WTERMSIG(st));
			_exit(WEXITSTATUS(st));
		}
	}
}
*/
import "C"

// Available says whether this binary can be a sandbox's reaper: a build
// without cgo has no constructor.
const Available = true
