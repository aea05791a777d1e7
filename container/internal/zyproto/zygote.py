# nsbox zygote: a Python interpreter that has imported a profile's modules
# and then only forks children on the engine's request. It never runs user
# code and never receives user data. Each child sandboxes itself with the
# fixed sequence in _child (fresh namespaces, its own /proc, /tmp, /dev/shm
# and /workspace, no capabilities, uid 1000, no_new_privs, the seccomp
# filter) before it runs anything; the engine places it in its cgroup and
# verifies all of it from the host before it says go and sends the child
# its command and environment over the child's own socket. A fork request
# carries only the sandbox's settings, never a run's code or data.
#
# The engine's /proc masks, read-only paths and default seccomp filter come
# once, in the zygote's config: a spare applies the masks (and drops its
# bounding set, and reseeds its random state) before it is taken, so none
# of that is on a request's path, and a request names a filter only when
# it is not the default. An argument of a child's command that is a string
# constant of the prelude (the runner's source) comes by that name, and the
# child takes the prelude's copy.
#
# fd 3 is the control socket. Frames both ways are a 4-byte big-endian
# length then JSON. A fork request carries SCM_RIGHTS fds [run socket,
# stdin, stdout, stderr, workspace mount] and, when its "mounts" lists
# names, the engine's read-only tmpfs for /mnt (a directory per name) and
# one detached mount per name, attached at /mnt/NAME; then, when its
# "tasks" is N > 0, the child's cgroup's N tasks files (cgroup v1), opened
# by the engine, to which the child writes "0": it places itself, with no
# migration of another process (the kernel's global lock). Replies: {"forked": pid} or
# {"error": why}; asynchronously {"exit": pid, "status": wait status}.
import os, sys, json, signal, socket, array, ctypes, struct, fcntl, gc, base64, types, importlib, platform, traceback
import resource, random, select

_CTL = 3
_libc = ctypes.CDLL(None, use_errno=True)
_papi = ctypes.PyDLL(None, use_errno=True)  # keeps the GIL across the call

_NR = {
    'x86_64': dict(clone=56, unshare=272, setgroups=116, setresuid=117, setresgid=119, capset=126,
                   seccomp=317, close_range=436, move_mount=429),
    'aarch64': dict(clone=220, unshare=97, setgroups=159, setresuid=147, setresgid=149, capset=91,
                    seccomp=277, close_range=436, move_mount=429),
}[platform.machine()]

CLONE_NEWNS = 0x20000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_CHILD_NS = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
MOVE_MOUNT_F_EMPTY_PATH = 4
AT_FDCWD = -100

# Child uids in this zygote's user namespace: slot i is ZYGOTE_UID_BASE + i.
ZYGOTE_UID_BASE = 100000


def _check(r, what):
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, '%s: %s' % (what, os.strerror(e)))
    return r


def _sys(name, *args):
    return _check(_libc.syscall(_NR[name], *args), name)


def _mount(src, tgt, fstype, flags, data=None):
    _check(_libc.mount(src.encode() if src else None, tgt.encode(), fstype.encode() if fstype else None,
                       ctypes.c_ulong(flags), data.encode() if data else None), 'mount ' + tgt)


def _prctl(op, a=0):
    return _check(_libc.prctl(op, ctypes.c_ulong(a), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)),
                  'prctl %d' % op)


def _read_exact(fd, n):
    b = b''
    while len(b) < n:
        c = os.read(fd, n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def _send(obj):
    b = json.dumps(obj, separators=(',', ':')).encode()
    b = len(b).to_bytes(4, 'big') + b
    while b:
        b = b[os.write(_CTL, b):]


def _recv(ctl):
    """One request, the fds sent with it, and its frame as it came."""
    fds = array.array('i')
    buf = b''
    need = 4
    n = None
    while len(buf) < need:
        # The fds arrive close-on-exec: no fcntl per fd after.
        data, anc, _, _ = ctl.recvmsg(need - len(buf), socket.CMSG_SPACE(16 * fds.itemsize), socket.MSG_CMSG_CLOEXEC)
        for level, typ, d in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(d[:len(d) - len(d) % fds.itemsize])
        if not data:
            raise EOFError
        buf += data
        if n is None and len(buf) >= 4:
            n = int.from_bytes(buf[:4], 'big')
            need = 4 + n
    return json.loads(buf[4:]), list(fds), buf


# /proc masks ------------------------------------------------------------

def _mask(p):
    try:
        os.lstat(p)
    except FileNotFoundError:
        return
    if os.path.isdir(p) and not os.path.islink(p):
        _mount('tmpfs', p, 'tmpfs', MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 'size=0')
    else:
        _mount('/dev/null', p, None, MS_BIND)


def _read_only(p):
    if not os.path.lexists(p):
        return
    _mount(p, p, None, MS_BIND | MS_REC)
    _mount(None, p, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _home_user():
    """Show the workspace at /home/user too, as init does: the zygote's
    own tree has the mount point (init's tmpfs on /home) unless the rootfs
    has no /home; a symlink there is never followed."""
    if os.path.islink('/home') or os.path.islink('/home/user') or not os.path.isdir('/home/user'):
        return
    _mount('/workspace', '/home/user', None, MS_BIND)


def _mnt(names, fds):
    """Attach the engine's read-only tmpfs (a directory per name) at /mnt,
    then the detached mounts at /mnt/NAME, as init does. The engine made
    the tmpfs: this child cannot create inodes (its root is unmapped). The
    engine checked the names (one safe path element each)."""
    if not names:
        return
    if len(fds) != 1 + len(names):
        raise OSError('%d mount fds for %d names' % (len(fds), len(names)))
    if os.path.islink('/mnt') or not os.path.isdir('/mnt'):
        raise OSError('the rootfs has no /mnt directory')
    _sys('move_mount', fds[0], b'', AT_FDCWD, b'/mnt', MOVE_MOUNT_F_EMPTY_PATH)
    for name, fd in zip(names, fds[1:]):
        if '/' in name or name in ('', '.', '..'):
            raise OSError('bad mount name %r' % name)
        _sys('move_mount', fd, b'', AT_FDCWD, ('/mnt/' + name).encode(), MOVE_MOUNT_F_EMPTY_PATH)


def _loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack('16sH14s', b'lo', 0, b'')
        flags = struct.unpack('16sH14s', fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack('16sH14s', b'lo', flags | 1, b''))  # SIOCSIFFLAGS, IFF_UP
    finally:
        s.close()


def _drop_bounding_set():
    for c in range(_CAP_LAST + 1):
        _prctl(PR_CAPBSET_DROP, c)


def _drop_privileges(uid, gid):
    _sys('setgroups', 0, None)
    _sys('setresgid', gid, gid, gid)
    _sys('setresuid', uid, uid, uid)
    hdr = struct.pack('II', 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    _sys('capset', hdr, bytes(24))
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


class _Fprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]


def _install_seccomp(prog):
    if not prog or len(prog) % 8:
        raise ValueError('seccomp program of %d bytes' % len(prog))
    buf = ctypes.create_string_buffer(prog, len(prog))
    fp = _Fprog(len(prog) // 8, ctypes.addressof(buf))
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _sys('seccomp', 1, 0, ctypes.byref(fp))  # SECCOMP_SET_MODE_FILTER


# Landlock, as sandboxinit's landlock_linux.go applies it (the same rules;
# keep the two alike; here made in two steps, _landlock_begin in the spare
# and _landlock in the taken child): filesystem rights by ABI version up to v5.
_LL_READ = 0x1 | 0x4 | 0x8  # execute, read file, read dir
_LL_WRITE = 0x2 | 0x10 | 0x20 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800 | 0x1000 | 0x2000 | 0x4000
_LL_FILE = 0x1 | 0x2 | 0x4 | 0x4000 | 0x8000  # what a file can have (ioctl on devices: 0x8000)
_LL_HANDLED = (0, (1 << 13) - 1, (1 << 14) - 1, (1 << 15) - 1, (1 << 15) - 1, (1 << 16) - 1)
_LL_HIDDEN = {'mnt', 'media', 'srv', 'root', 'home', 'boot', 'lost+found', 'proc', 'dev', 'tmp', 'workspace'}
_LL_DEV = ('null', 'zero', 'full', 'random', 'urandom')
_MAX_PTYS = 64  # sandboxinit.MaxPtys


def _landlock_begin():
    """The part of the rules no run changes, made by a spare before a run
    takes it (off the spawn's path): a ruleset of this child's own with
    listing at /, every top-level rootfs directory but the hidden ones,
    /proc (the spare's own) and the device nodes. Rules are on inodes, and
    these are the same ones the run will see: a run only mounts over
    /workspace, /home/user, /tmp, /dev/shm, /dev/pts and under /mnt, which
    _landlock adds once they are mounted. None without Landlock."""
    abi = _libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi <= 0:
        return None
    handled = _LL_HANDLED[min(abi, len(_LL_HANDLED) - 1)]
    rules = [('/', 0x8)]
    rules += [('/' + n, _LL_READ) for n in sorted(os.listdir('/')) if n not in _LL_HIDDEN and os.path.isdir('/' + n)]
    rules += [('/proc', _LL_READ | _LL_WRITE)]
    rules += [('/dev/' + n, _LL_FILE & ~0x1) for n in _LL_DEV]
    attr = struct.pack('=Q', handled)
    rs = _check(_libc.syscall(444, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)), 'landlock_create_ruleset')
    try:
        _landlock_add(rs, handled, rules)
    except BaseException:
        os.close(rs)
        raise
    return rs, handled


def _landlock_add(rs, handled, rules):
    for p, access in rules:
        try:
            fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            if os.fstat(fd).st_mode & 0o170000 != 0o040000:
                access &= _LL_FILE
            rule = struct.pack('=Qi', access & handled, fd)  # struct landlock_path_beneath_attr, packed
            _check(_libc.syscall(445, ctypes.c_int(rs), ctypes.c_int(1), rule, ctypes.c_uint32(0)),
                   'landlock rule for ' + p)
        finally:
            os.close(fd)


def _landlock(mode, mounts, begun):
    """Restrict this child, single-threaded here, to the sandbox's rules;
    what it runs inherits them. auto: as far as the kernel's ABI goes.
    begun is _landlock_begin's ruleset (closed here), or the exception it
    raised."""
    if isinstance(begun, BaseException):
        if mode != 'off':
            raise begun
        return
    if begun is None:
        if mode == 'required':
            raise OSError('[security] landlock = "required" but this kernel has no Landlock')
        return
    rs, handled = begun
    try:
        if mode == 'off':
            return
        rules = [(p, _LL_READ | _LL_WRITE) for p in ('/workspace', '/tmp', '/dev/shm')]
        rules += [('/dev/pts', _LL_FILE & ~0x1)]
        rules += [('/mnt/' + m, _LL_READ | _LL_WRITE) for m in mounts]
        _landlock_add(rs, handled, rules)
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _check(_libc.syscall(446, ctypes.c_int(rs), ctypes.c_uint32(0)), 'landlock_restrict_self')
    finally:
        os.close(rs)


def _reseed():
    random.seed()  # Python's own fork hook does this too; be explicit
    np = sys.modules.get('numpy')
    if np is not None:
        # The legacy global generator gets a whole MT19937 state from the
        # kernel: what np.random.seed() does, without its SeedSequence (half
        # the pages touched, so half the copy-on-write faults).
        np.random.set_state(('MT19937', np.frombuffer(os.urandom(624 * 4), dtype=np.uint32), 624))


def _threads(n):
    """Let the numeric libraries use n threads (the zygote runs with one)."""
    if n <= 1 or 'threadpoolctl' not in sys.modules:
        return
    try:
        sys.modules['threadpoolctl'].threadpool_limits(n)
    except Exception:
        pass


def _fail(run, msg):
    try:
        os.write(run, b'E' + msg.encode('utf-8', 'replace'))
    finally:
        os._exit(127)


def _spare(sock):
    """A child from its clone until it is taken: it sets up what depends
    on no run (signals, session, a private mount tree with its own /proc
    and the engine's masks on it, loopback up, an empty bounding set, its
    own random state), then waits for the zygote to hand it a fork request
    and its fds. Until then it holds nothing of any run. EOF (the zygote
    dropped it, or died) or any failure ends it."""
    failed, begun = None, None
    try:
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()  # a session of its own, no controlling terminal
        _mount(None, '/', None, MS_REC | MS_PRIVATE)
        _mount('proc', '/proc', 'proc', MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for p in _MASKED:
            _mask(p)
        for p in _READ_ONLY:
            _read_only(p)
        _loopback_up()
        # Only what an execve could gain: the spare keeps its effective
        # capabilities for the mounts still to come.
        _drop_bounding_set()
        # Each spare serves one child: a state drawn here is that child's
        # alone.
        _reseed()
        try:
            begun = _landlock_begin()
        except Exception as e:
            begun = e  # the run's mode says whether it matters
    except BaseException as e:
        failed = 'spare set-up: %s' % e  # reported to the run that takes it
    try:
        req, fds, _ = _recv(sock)
        sock.close()
        run = fds[0]
    except BaseException:
        os._exit(127)
    if failed:
        _fail(run, failed)
    _child(req, run, fds, begun)


def _child(req, run, fds, begun):
    """The child once taken, before anything it was sent runs. Every step
    is fixed here; the engine decides the values and verifies the
    outcome."""
    step = 'start'
    ntasks = req.get('tasks') or 0
    tasks, fds = fds[len(fds) - ntasks:], fds[:len(fds) - ntasks]
    try:
        step = 'cgroup placement'
        for fd in tasks:
            os.write(fd, b'0')  # this thread, the only one: the whole child
            os.close(fd)
        step = 'stdio'
        for i, fd in enumerate(fds[1:4]):
            os.dup2(fd, i)
        os.write(run, b'H')  # the kernel attaches our host pid (the engine has SO_PASSCRED)

        step = 'mounts'
        size = 'size=%d,nr_inodes=%d,mode=1777' % (req['tmp_bytes'], req['tmp_inodes'])
        _mount('tmpfs', '/tmp', 'tmpfs', MS_NOSUID | MS_NODEV, size)
        _mount('tmpfs', '/dev/shm', 'tmpfs', MS_NOSUID | MS_NODEV | MS_NOEXEC, size)
        # A devpts instance of the child's own over the zygote's (as
        # sandboxinit's setupPts; /dev/ptmx links to pts/ptmx): its
        # terminals are never another child's.
        _mount('devpts', '/dev/pts', 'devpts', MS_NOSUID | MS_NOEXEC, 'newinstance,ptmxmode=0666,mode=0620,max=%d' % _MAX_PTYS)
        _sys('move_mount', fds[4], b'', AT_FDCWD, b'/workspace', MOVE_MOUNT_F_EMPTY_PATH)
        _home_user()
        _mnt(req.get('mounts') or [], fds[5:])
        step = 'uts'
        h = req['hostname'].encode()
        _check(_libc.sethostname(h, len(h)), 'sethostname')
        step = 'rlimits'
        resource.setrlimit(resource.RLIMIT_NOFILE, (req['nofile'], req['nofile']))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (req['fsize'], req['fsize']))

        step = 'wait for cgroup placement'
        if _read_exact(run, 1) != b'P':
            raise OSError('bad placement byte')
        if req['cgroupns']:
            step = 'cgroup namespace'
            _sys('unshare', CLONE_NEWCGROUP)
        step = 'credentials'
        _drop_privileges(req['uid'], req['gid'])
        os.chdir('/workspace')
        os.umask(0o022)
        # Before close_range, which would close the spare's ruleset.
        step = 'landlock'
        _landlock(req.get('landlock') or 'auto', req.get('mounts') or [], begun)
        step = 'fds'
        if run != 3:
            os.dup2(run, 3)
            run = 3
        os.set_inheritable(3, False)
        _sys('close_range', 4, ctypes.c_uint(0xffffffff), 0)
        step = 'seccomp'
        if req.get('test_skip') != 'seccomp':  # the engine's verification tests only
            _install_seccomp(base64.b64decode(req['seccomp']) if req.get('seccomp') else _SECCOMP)
        step = 'threads'
        _threads(req.get('threads', 1))
        os.write(run, b'R')
        # Verified: the engine says go and sends the run itself (argv and
        # environment) straight to us; the zygote never sees it.
        step = 'receive the run'
        if _read_exact(run, 1) != b'G':
            os._exit(0)
        spec = json.loads(_read_exact(run, int.from_bytes(_read_exact(run, 4), 'big')))
        for i, name in (spec.get('held') or {}).items():
            v = getattr(sys.modules.get('_nsbox_prelude'), name, None)
            if not isinstance(v, str):
                raise ValueError('held argument %s: the prelude has no string %r' % (i, name))
            spec['argv'][int(i)] = v
        os.environ.clear()
        for kv in spec['env']:
            k, _, v = kv.partition('=')
            os.environ[k] = v
        if not req['control']:
            os.close(run)
    except BaseException as e:
        _fail(run, '%s: %s' % (step, e))
    _exec(spec['argv'])


def _exec(argv):
    """Run argv (python3 -I -c CODE ARGS...) in this interpreter, as a fresh
    python3 would: a new __main__, sys.argv, exit status."""
    code = 0
    try:
        main = types.ModuleType('__main__')
        sys.modules['__main__'] = main
        sys.argv[:] = ['-c'] + argv[4:]
        exec(compile(argv[3], '<string>', 'exec'), main.__dict__)
    except SystemExit as e:
        c = e.code
        if c is None:
            code = 0
        elif isinstance(c, int):
            code = c & 0xff
        else:
            print(c, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    _flush()
    os._exit(code)


def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass


def _clone():
    """fork() into fresh user, mount, net, ipc, uts and pid namespaces in
    one clone(2). Safe only in a single-threaded process: glibc's atfork
    handlers do not run, and neither do Python's (PyOS_BeforeFork and
    PyOS_AfterFork_*). Those reinitialise locks another thread might have
    held and run the os.register_at_fork hooks; with one thread, which
    holds no lock but the GIL here, the child's interpreter is the
    zygote's as it stands, and the hooks registered here (random's reseed,
    threading's bookkeeping of other threads) have nothing to do that
    _reseed does not. They cost a child ~280 copy-on-write faults, ~0.8 ms
    of CPU."""
    pid = _papi.syscall(_NR['clone'], ctypes.c_ulong(_CHILD_NS | signal.SIGCHLD), 0, 0, 0, 0)
    return _check(pid, 'clone')


def _write_map(pid, name, slot):
    # os.open, not open(): no file object to build on the request's path,
    # in a zygote whose every allocation after a fork copies a page.
    fd = os.open('/proc/%d/%s' % (pid, name), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, b'%d %d 1\n' % (_USER_ID, ZYGOTE_UID_BASE + slot))
    finally:
        os.close(fd)


# The spare child: (pid, the zygote's end of its socket), or None.
_SPARE = None


def _make_spare(ctl):
    """Clone a spare child, to be taken by the next fork request: the
    clone, the interpreter's after-fork work and the spare's own set-up
    then happen between requests rather than in one."""
    global _SPARE
    if _SPARE is not None:
        return
    threads = len(os.listdir('/proc/self/task'))
    if threads != 1:
        raise RuntimeError('the zygote has %d threads; a raw clone needs exactly one' % threads)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    _flush()
    pid = _clone()
    if pid == 0:
        ctl.detach()  # fd 3 is closed by close_range; the object must not close it later
        ours.close()
        try:
            _spare(theirs)
        finally:
            os._exit(127)
    theirs.close()
    _SPARE = (pid, ours)


def _drop_spare(pid=None):
    """Forget the spare (when pid is None or names it): it ends at the EOF."""
    global _SPARE
    if _SPARE is not None and pid in (None, _SPARE[0]):
        _SPARE[1].close()
        _SPARE = None


def _fork(ctl, req, fds, frame):
    global _SPARE
    n = len(req.get('mounts') or [])
    want = 5 + (n + 1 if n else 0) + (req.get('tasks') or 0)
    if len(fds) != want:
        raise ValueError('fork request with %d fds, want %d' % (len(fds), want))
    slot = int(req['slot'])
    if not 0 <= slot < _SLOTS:
        raise ValueError('slot %d out of range' % slot)
    for attempt in (1, 2):
        _make_spare(ctl)
        (pid, sock), _SPARE = _SPARE, None
        try:
            # A live spare never writes to its socket: an event on it is
            # its death (EOF). Such a spare is still our unreaped child
            # (only this thread reaps), so its pid names no other process.
            p = select.poll()
            p.register(sock, select.POLLIN)
            if p.poll(0):
                os.kill(pid, signal.SIGKILL)
                if attempt == 2:
                    raise OSError('spare children die at once')
                continue
            # The kernel takes a child's id map only from its own user
            # namespace or the parent's: here. It bounds it by our own map,
            # so the ids can only come from the block the engine gave us.
            # The request goes on as it came (the spare parses the same
            # bytes): no second encoding in the zygote, whose every
            # allocation after a fork copies a page it shares with a child.
            b = frame
            try:
                _write_map(pid, 'uid_map', slot)
                _write_map(pid, 'gid_map', slot)
                sent = socket.send_fds(sock, [b], fds)
                if sent < len(b):
                    # Not an empty send after a whole one: the spare may
                    # have read it all and closed its end (EPIPE).
                    sock.sendall(b[sent:])
            except OSError:
                # It may hold the run's fds by now: they never go to
                # another child, the run fails (the engine falls back).
                os.kill(pid, signal.SIGKILL)
                raise
            return pid
        finally:
            sock.close()


def _huge_pages():
    """Back the heap with transparent huge pages: a fork then copies one
    page-table entry per 2 MiB instead of 512, and so does the exit."""
    huge = 2 << 20
    with open('/proc/self/maps') as f:
        regions = [l.split() for l in f]
    for r in regions:
        if 'w' not in r[1] or (len(r) > 5 and r[5] != '[heap]'):
            continue
        a, b = (int(x, 16) for x in r[0].split('-'))
        a, b = (a + huge - 1) & ~(huge - 1), b & ~(huge - 1)
        if b - a < huge:
            continue
        _libc.madvise(ctypes.c_void_p(a), ctypes.c_size_t(b - a), 14)  # MADV_HUGEPAGE
        _libc.madvise(ctypes.c_void_p(a), ctypes.c_size_t(b - a), 25)  # MADV_COLLAPSE


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if _SPARE is not None and _SPARE[0] == pid:
            _drop_spare(pid)  # never taken: the engine does not know it
            continue
        _send({'exit': pid, 'status': status})


def main():
    global _CAP_LAST, _SLOTS, _USER_ID, _MASKED, _READ_ONLY, _SECCOMP
    cfg = json.loads(sys.argv[1])
    _SLOTS = int(cfg['slots'])
    _USER_ID = int(cfg['user_id'])
    _MASKED = tuple(cfg.get('masked') or ())
    _READ_ONLY = tuple(cfg.get('read_only') or ())
    _SECCOMP = base64.b64decode(cfg.get('seccomp') or '')
    with open('/proc/sys/kernel/cap_last_cap') as f:
        _CAP_LAST = int(f.read())
    skipped = []
    for m in cfg.get('modules') or []:
        try:
            importlib.import_module(m)
        except Exception:
            skipped.append(m)
    prelude = cfg.get('prelude')
    if prelude:  # the operator's, never a run's
        mod = types.ModuleType('_nsbox_prelude')
        sys.modules[mod.__name__] = mod
        exec(compile(prelude, '<nsbox-prelude>', 'exec'), mod.__dict__)
    gc.collect()
    gc.freeze()  # children share these pages; keep the collector off them
    if cfg.get('huge_pages'):
        _huge_pages()

    ctl = socket.socket(fileno=_CTL)
    rd, wr = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wr, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    stdlib = sorted(getattr(sys, 'stdlib_module_names', ()))
    loaded = sorted({m.partition('.')[0] for m in list(sys.modules)})
    _send({'ready': True, 'skipped': skipped, 'threads': len(os.listdir('/proc/self/task')),
           'loaded': loaded, 'stdlib': stdlib})
    poller = select.poll()
    poller.register(_CTL, select.POLLIN)
    poller.register(rd, select.POLLIN)
    while True:
        try:
            _make_spare(ctl)
        except Exception as e:
            sys.stderr.write('nsbox zygote: spare: %s\n' % e)
        for fd, _ in poller.poll():
            if fd == rd:
                try:
                    os.read(rd, 512)
                except BlockingIOError:
                    pass
                _reap()
                continue
            try:
                req, fds, frame = _recv(ctl)
            except EOFError:
                return
            if 'kill' in req:  # a child that never finished its set-up
                try:
                    os.kill(int(req['kill']), signal.SIGKILL)
                except ProcessLookupError:
                    pass
                continue
            try:
                _send({'forked': _fork(ctl, req, fds, frame)})
            except Exception as e:
                _send({'error': '%s: %s' % (type(e).__name__, e)})
            finally:
                for fd in fds:
                    os.close(fd)
        _reap()


main()
