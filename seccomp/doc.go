// Package seccomp holds the sandbox's syscall policy: Docker-format JSON
// profiles (Load, and the embedded Default), compiled once per daemon to a
// classic-BPF Program with libseccomp (Compile), and installed by the
// re-exec'd init with one raw seccomp(2) call right before execve
// (Program.Install, no cgo).
//
// Only the native ABI is compiled; a syscall through any other one (i386
// int 0x80, x32 numbers with bit 30 set) kills the process. Entries gated on
// capabilities (includes.caps) are skipped because sandboxed code holds
// none; excludes.caps entries are kept.
//
// # The default profile
//
// default.json is Docker's default profile (moby/profiles
// seccomp/default.json) with default action ERRNO(EPERM), minus what
// untrusted code must not reach even without capabilities:
//
//   - ptrace, process_vm_readv, process_vm_writev, kcmp, pidfd_getfd:
//     reading and writing other processes' memory and fds.
//   - bpf, perf_event_open, userfaultfd, io_uring_setup/enter/register:
//     the kernel's favourite exploit surfaces (eBPF verifier, perf, uffd
//     race widening, io_uring); none of them is needed by Python.
//   - keyctl, add_key, request_key: the keyring is not namespaced.
//   - mount, umount2, pivot_root, move_mount, fsopen, fsconfig, fsmount,
//     fspick, open_tree, mount_setattr, chroot: the mount layout is fixed
//     by the engine.
//   - unshare, setns, and clone with any CLONE_NEW* flag (mask 0x7E020000):
//     nested namespaces, user namespaces above all, are kernel attack
//     surface. clone3 returns ENOSYS (its flags live in memory seccomp
//     cannot read), so glibc and Go fall back to clone.
//   - kexec_load, kexec_file_load, init_module, finit_module,
//     delete_module, reboot, acct, iopl, ioperm, syslog, quotactl,
//     lookup_dcookie, uselib, vm86: host administration.
//   - clock_settime, settimeofday, stime, adjtimex, clock_adjtime: the
//     clock is the host's (adjtimex is refused outright since seccomp
//     cannot tell a read from a set).
//   - open_by_handle_at, name_to_handle_at: file handles bypass the
//     mount tree (the "shocker" container escape).
//   - personality other than 0, 8, 0x20000, 0x20008 and 0xffffffff
//     (READ_IMPLIES_EXEC and ADDR_NO_RANDOMIZE weaken exploits' hurdles).
//   - socket for AF_ALG (38, kernel crypto API) and AF_VSOCK (40, host
//     channel): Docker's family list already leaves them out. AF_NETLINK
//     stays allowed: glibc's getaddrinfo uses it.
//   - ioctl TIOCSTI (0x5412, inject input into the terminal) and TIOCLINUX
//     (0x541C), compared on the low 32 bits only because the kernel reads
//     cmd as an unsigned int (bubblewrap CVE-2019-10063).
//
// Also dropped with Docker's capability-gated entries: fanotify_init,
// sethostname, setdomainname, vhangup, mbind, get_mempolicy,
// set_mempolicy, set_mempolicy_home_node, process_madvise, quotactl_fd and
// the lsm_* calls.
//
// libseccomp lets an unconditional rule (allow ioctl) swallow the
// conditional rules of the same syscall (EPERM for TIOCSTI). Compile keeps
// such exceptions by compiling them into a first-stage filter chained in
// front of the main one; see Profile.Compile.
package seccomp
