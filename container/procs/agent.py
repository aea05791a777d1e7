# nsbox process agent. The runner starts it (a fresh python3 -I -S) with FD,
# one end of a socketpair the host made, passed over the runner's control
# socket. It starts processes and passes their output on; frames both ways
# are a 4-byte big-endian length, then JSON (bytes as base64).
#
# host -> agent: {"id", "op": "start", "cmd", "args", "env", "cwd", "stdin", "pty": {"rows", "cols"}}
#                {"id", "op": "input", "pid", "data"} | {"id", "op": "close_stdin", "pid"}
#                {"id", "op": "resize", "pid", "pty": {"rows", "cols"}}
#                {"id", "op": "signal", "pid", "signal"}
#                file operations, as the sandbox's user, in its mount namespace:
#                {"id", "op": "fstat" | "flist" (+ "depth") | "fmkdir" | "fremove", "path"}
#                {"id", "op": "frename", "path", "to"} | {"id", "op": "fopen", "path", "write"}
#                {"id", "op": "fread", "fh"} | {"id", "op": "fwrite", "fh", "data"} | {"id", "op": "fclose", "fh"}
#                {"id", "op": "fwatch", "path", "recursive"} | {"id", "op": "funwatch", "wid"}
#                {"id", "op": "fsetmeta", "path" | "fh", "meta"} | {"id", "op": "fmeta", "paths"}
# agent -> host: {"id", "pid"} (started) | {"id"} (done) | {"id", "error", "kind"}
#                {"pid", "out" | "err" | "pty": data} | {"pid", "end": true, "code" | "signal"}
#                {"id", "entry"} | {"id", "entries"} | {"id", "created"} | {"id", "fh", "size"} | {"id", "data"}
#                {"id", "meta"} | {"id", "metas"}
#                {"id", "wid"} | {"wid", "ev": [[op, name], ...]} | {"wid", "end": true, "error"}
try:  # first: non-dumpable, so that same-uid code in the sandbox (a cell,
    # a command) can neither open /proc/<agent>/mem nor ptrace it to forge
    # frames; the agent starts before any user code runs in its sandbox
    import ctypes
    _libc = ctypes.CDLL(None)
    _libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
except Exception:  # a rootfs without ctypes: docs/SECURITY.md
    _libc = None
import os, json, signal, selectors, subprocess, base64, errno, stat

CHUNK = 32 << 10     # one read of a process's pipe
HIGH = 1 << 20       # output queued for the host above which pipes are not read
LOW = HIGH // 4      # ... and below which they are read again
DRAIN = 4 << 20      # read at most this much of a pipe after its process ended
MAX_FRAME = 16 << 20

FD = globals().get('FD', -1)
if globals().get('READY', -1) >= 0:  # the runner runs no cell until this
    os.close(READY)
sel = selectors.DefaultSelector()
procs = {}           # pid -> Proc
out = bytearray()    # frames not yet sent to the host
inbuf = bytearray()
paused = False


def send(obj):
    b = json.dumps(obj, separators=(',', ':')).encode()
    out.extend(len(b).to_bytes(4, 'big'))
    out.extend(b)


def b64(b):
    return base64.b64encode(b).decode()


class Proc:
    def __init__(self, p, tty=None):
        self.p, self.pid = p, p.pid
        self.pipes = {}            # fd -> 'out' | 'err' | 'pty'
        self.stdin = p.stdin.fileno() if p.stdin else -1
        self.tty = tty             # a pty's master: [read fd, write fd]
        self.inq = []              # [id, bytes] not yet written to stdin
        self.close_id = None       # a close_stdin waiting for inq
        outs = ((p.stdout, 'out'), (p.stderr, 'err')) if tty is None else ()
        for fd, k in [(f.fileno(), k) for f, k in outs] + ([(tty[0], 'pty')] if tty else []):
            os.set_blocking(fd, False)
            self.pipes[fd] = k
            if not paused:
                sel.register(fd, selectors.EVENT_READ, (self.read, k))
        if tty is not None:
            self.stdin = tty[1]
        if self.stdin >= 0:
            os.set_blocking(self.stdin, False)

    def read(self, fd, k, limit=CHUNK):
        n = 0
        while n < limit:
            try:
                b = os.read(fd, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                b = b''
            if not b:
                self.close_pipe(fd)
                return
            send({'pid': self.pid, k: b64(b)})
            n += len(b)

    def close_pipe(self, fd):
        if self.pipes.pop(fd, None) is not None:
            if not paused:
                sel.unregister(fd)
            os.close(fd)

    def write(self, fd, _):
        while self.inq:
            rid, b = self.inq[0]
            try:
                n = os.write(fd, b)
            except BlockingIOError:
                return
            except OSError as e:
                self.close_stdin(e)
                return
            if n < len(b):
                self.inq[0][1] = b[n:]
                continue
            self.inq.pop(0)
            send({'id': rid})
        sel.unregister(fd)
        if self.close_id is not None:
            rid, self.close_id = self.close_id, None
            self.close_stdin()
            send({'id': rid})

    def want_write(self):
        try:
            sel.register(self.stdin, selectors.EVENT_WRITE, (self.write, None))
        except KeyError:
            pass

    def close_stdin(self, err=None):
        if self.stdin < 0:
            return
        try:
            sel.unregister(self.stdin)
        except KeyError:
            pass
        if self.tty is None:
            self.p.stdin.close()
        else:
            os.close(self.tty[1])
        self.stdin = -1
        why = 'stdin is closed: %s' % (err.strerror if err else 'the process ended')
        for rid, _ in self.inq:
            send({'id': rid, 'error': why})
        self.inq = []
        if self.close_id is not None:
            send({'id': self.close_id})
            self.close_id = None

    def ended(self, status):
        # Passed on at the exit of the process itself, like envd's: what is
        # left in its pipes, then the end. A background child that still
        # holds them gets EPIPE from then on.
        self.p.returncode = os.waitstatus_to_exitcode(status)
        for fd, k in list(self.pipes.items()):
            self.read(fd, k, DRAIN)
            self.close_pipe(fd)
        self.close_stdin()
        ev = {'pid': self.pid, 'end': True}
        if os.WIFSIGNALED(status):
            ev['signal'] = os.WTERMSIG(status)
        else:
            ev['code'] = os.WEXITSTATUS(status)
        send(ev)
        del procs[self.pid]


def default_cwd():
    return '/home/user' if os.path.isdir('/home/user') else '/workspace'


# Node writes to a pipe without blocking: past the pipe's 64 KiB, what a
# synchronous loop writes waits in its memory, flushed only when the event
# loop runs, so `for(;;) process.stdout.write(...)` delivered 64 KiB and
# grew until the sandbox's memory limit killed it. This preload makes a
# Node command's stdout and stderr pipes blocking, as nsbox's Node runner
# makes its own: a flood goes at the host's pace (back-pressure), and the
# host drains the agent whether or not anyone subscribes (a slow
# subscriber is dropped), so a blocked write does not wait for ever.
NODE_PRELOAD = '/tmp/.nsbox-node-stdio.cjs'
NODE_PRELOAD_SRC = (b"for (const s of [process.stdout, process.stderr]) {\n"
                    b"  if (s && s._handle && typeof s._handle.setBlocking === 'function') s._handle.setBlocking(true);\n"
                    b"}\n")


def node_options(env):
    """Puts the preload first in env's NODE_OPTIONS, writing it again when
    it is gone (a command may clean /tmp); without a writable /tmp it is
    left out."""
    try:
        with open(NODE_PRELOAD, 'rb') as f:
            ok = f.read() == NODE_PRELOAD_SRC
    except OSError:
        ok = False
    if not ok:
        try:
            tmp = NODE_PRELOAD + '.%d' % os.getpid()
            with open(tmp, 'wb') as f:
                f.write(NODE_PRELOAD_SRC)
            os.rename(tmp, NODE_PRELOAD)
        except OSError:
            return
    env['NODE_OPTIONS'] = ('--require=' + NODE_PRELOAD + ' ' + env.get('NODE_OPTIONS', '')).strip()


def winsize(fd, size):
    import fcntl, termios, struct
    rows, cols = int(size.get('rows') or 24), int(size.get('cols') or 80)
    if not (0 < rows < 1 << 16 and 0 < cols < 1 << 16):
        raise OSError(errno.EINVAL, 'rows and cols must be 1 to 65535')
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))


def controlling_tty():
    """In the child, after setsid: its stdin, the pty's slave, becomes its
    session's controlling terminal (Ctrl-C, Ctrl-Z and job control reach
    its foreground group)."""
    import fcntl, termios
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def open_pty(size):
    """A terminal of the sandbox's own devpts: [master read, master
    write], slave. The master is read and written through two fds, so
    that its output and input close apart, as a pipe's do."""
    m, s = os.openpty()
    try:
        winsize(m, size)
        w = os.dup(m)
    except BaseException:
        os.close(m)
        os.close(s)
        raise
    os.set_inheritable(m, False)
    os.set_inheritable(w, False)
    return [m, w], s


def start(req):
    env = dict(os.environ)
    env.update(req.get('env') or {})
    node_options(env)
    argv = [req['cmd']] + list(req.get('args') or [])
    cwd = req.get('cwd') or default_cwd()
    tty, extra = None, {}
    if req.get('pty') is not None:
        try:
            tty, slave = open_pty(req['pty'])
        except OSError as e:
            return send({'id': req['id'], 'error': 'a terminal: %s' % e.strerror, 'kind': 'start_pty'})
        extra = dict(stdin=slave, stdout=slave, stderr=slave, preexec_fn=controlling_tty)
    else:
        extra = dict(stdin=subprocess.PIPE if req.get('stdin') else subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        try:
            p = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True, bufsize=0, **extra)
        finally:
            if tty is not None:
                os.close(slave)
    except OSError as e:
        if tty is not None:
            os.close(tty[0])
            os.close(tty[1])
        what = 'cwd' if e.filename == cwd and e.filename != req['cmd'] else 'cmd'
        kind = 'not_found' if e.errno == errno.ENOENT else 'start'
        send({'id': req['id'], 'error': '%s %r: %s' % ('working directory' if what == 'cwd' else 'command', e.filename or req['cmd'], e.strerror),
              'kind': kind + '_' + what})
        return
    send({'id': req['id'], 'pid': p.pid})
    procs[p.pid] = Proc(p, tty)


def signal_session(sid, sig):
    """Signals every process of a terminal's session: the shell's jobs run
    in process groups of their own (job control), and a SIGKILLed shell
    hangs none of them up, so a killed terminal would leave its
    background jobs running in the sandbox."""
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == sid:
            continue
        try:
            if os.getsid(int(d)) == sid:
                os.kill(int(d), sig)
        except OSError:
            pass  # gone meanwhile


def handle(req):
    op = req.get('op')
    if op == 'start':
        return start(req)
    if op in FILE_OPS:
        try:
            return send(dict(FILE_OPS[op](req), id=req['id']))
        except OSError as e:
            return send({'id': req['id'], 'error': e.strerror or str(e),
                         'kind': errno.errorcode.get(e.errno, 'EIO')})
    pr = procs.get(req.get('pid'))
    if pr is None:
        return send({'id': req['id'], 'error': 'no process %s' % req.get('pid'), 'kind': 'not_found'})
    if op == 'signal':
        if pr.tty is not None:
            signal_session(pr.pid, req['signal'])
        try:
            os.killpg(pr.pid, req['signal'])
        except ProcessLookupError:
            pass  # the group is gone; its end is on its way
        except OSError as e:
            return send({'id': req['id'], 'error': e.strerror})
        return send({'id': req['id']})
    if op == 'resize':
        if pr.tty is None or pr.stdin < 0:
            return send({'id': req['id'], 'error': 'not a terminal', 'kind': 'pty'})
        try:
            winsize(pr.stdin, req.get('pty') or {})
        except OSError as e:
            return send({'id': req['id'], 'error': e.strerror, 'kind': 'pty'})
        return send({'id': req['id']})
    if op == 'close_stdin' and pr.tty is not None:
        return send({'id': req['id'], 'error': 'a terminal has no stdin to close: send Ctrl-D (0x04)', 'kind': 'pty'})
    if op in ('input', 'close_stdin'):
        if pr.stdin < 0 or pr.close_id is not None:
            return send({'id': req['id'], 'error': 'stdin is closed or was not asked for', 'kind': 'stdin'})
        if op == 'input':
            pr.inq.append([req['id'], base64.b64decode(req.get('data', ''))])  # absent: empty
            pr.want_write()
        elif pr.inq:
            pr.close_id = req['id']
        else:
            pr.close_stdin()
            send({'id': req['id']})
        return
    send({'id': req['id'], 'error': 'unknown op %r' % op})


# File operations. They run here, in the sandbox, as its user: the kernel
# checks every path against the sandbox's own mounts and credentials (the
# read-only rootfs, /tmp's size cap, the user's permissions), and nothing
# the host has is reachable from here, so a symlink, '..' or /proc/*/root
# resolves inside the sandbox as it would for a command. Only regular
# files are read or written (opened non-blocking: a FIFO or a device
# never blocks the agent's loop).
MAX_FILES = 64       # open handles
FILE_CHUNK = 256 << 10
MAX_ENTRIES = 10000
MAX_LISTING = 6 << 20  # a listing's frame, under the host's 8 MiB
files = {}           # fh -> fd
next_fh = 0


def _name(db, n):
    try:
        return db(n)[0]
    except (KeyError, ImportError, OSError):
        return str(n)


def _owner(uid):
    import pwd
    return _name(pwd.getpwuid, uid)


def _group(gid):
    import grp
    return _name(grp.getgrgid, gid)


def entry(path):
    st = os.lstat(path)
    e = {'path': path, 'name': os.path.basename(path) or '/', 'size': st.st_size, 'mode': st.st_mode,
         'mtime': st.st_mtime_ns, 'owner': _owner(st.st_uid), 'group': _group(st.st_gid)}
    if stat.S_ISLNK(st.st_mode):
        e['link'] = os.readlink(path)
        try:  # where it leads, as envd's EvalSymlinks and stat
            to = os.stat(path)
            e['target'], e['target_mode'] = os.path.realpath(path), to.st_mode
        except OSError:
            pass
    m = _meta(path)
    if m:
        e['meta'] = m
    return e


# File metadata, as envd keeps it: user.e2b.KEY extended attributes
# (a symlink's are its target's). Read best effort, as envd reads them:
# names or values that are not UTF-8 are left out, and so is what goes
# past META_MAX (envd's bound on a write: the names with their prefix and
# the values), names in order, so that an entry's frame stays bounded
# whatever was set from inside the sandbox.
META = 'user.e2b.'
META_MAX = 4096


def _meta(p):
    try:
        names = sorted(n for n in os.listxattr(p) if n.startswith(META))
    except OSError:
        return None
    m, size = {}, 0
    for n in names:
        try:
            k, v = n[len(META):], os.getxattr(p, n)
            k.encode('utf-8'), v.decode('utf-8')
        except (OSError, UnicodeError):
            continue
        if size + len(n) + len(v) > META_MAX:
            continue
        size += len(n) + len(v)
        m[k] = v.decode('utf-8')
    return m or None


def f_setmeta(req):
    # Replaces the file's metadata with meta (none: cleared), as envd does
    # after each upload: truncating a file keeps its xattrs. A filesystem
    # that keeps no user xattrs fails (EOPNOTSUPP) unless there is nothing
    # to set; the metadata read back is the reply.
    meta, fd = req.get('meta') or {}, files.get(req.get('fh'))
    own = fd is None
    if own:
        fd = os.open(req['path'], os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _regular(fd)
        try:
            names = os.listxattr(fd)
        except OSError as e:
            if e.errno == errno.EOPNOTSUPP and not meta:
                return {}
            raise
        for n in names:
            if n.startswith(META) and n[len(META):] not in meta:
                os.removexattr(fd, n)
        for k, v in meta.items():
            os.setxattr(fd, META + k, v.encode('utf-8'))
        return {'meta': _meta(fd)}
    finally:
        if own:
            os.close(fd)


META_PATHS = 128     # paths of one fmeta: its reply stays under the host's frame


def f_meta(req):
    paths = req.get('paths') or []
    if len(paths) > META_PATHS:
        raise OSError(errno.E2BIG, 'more than %d paths' % META_PATHS)
    return {'metas': [_meta(p) for p in paths]}


def f_stat(req):
    return {'entry': entry(req['path'])}


def f_list(req):
    root, depth = req['path'], max(1, req.get('depth') or 1)
    if not stat.S_ISDIR(os.stat(root).st_mode):
        raise OSError(errno.ENOTDIR, 'not a directory')
    out, todo, size = [], [(root, 1)], 0
    while todo:
        d, level = todo.pop()
        with os.scandir(d) as it:
            for de in it:
                if len(out) >= MAX_ENTRIES:
                    raise OSError(errno.E2BIG, 'more than %d entries' % MAX_ENTRIES)
                try:
                    e = entry(de.path)
                except OSError:
                    continue  # gone meanwhile
                size += len(json.dumps(e, separators=(',', ':'))) + 1
                if size > MAX_LISTING:
                    raise OSError(errno.E2BIG, 'the listing is larger than %d MiB' % (MAX_LISTING >> 20))
                out.append(e)
                if level < depth and stat.S_ISDIR(e['mode']):
                    todo.append((de.path, level + 1))
    return {'entries': out}


def f_mkdir(req):
    p = req['path']
    try:
        st = os.stat(p)
    except FileNotFoundError:
        os.makedirs(p)
        return {'created': True}
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(errno.ENOTDIR, 'exists and is not a directory')
    return {'created': False}


def f_rename(req):
    os.lstat(req['path'])
    os.makedirs(os.path.dirname(req['to']), exist_ok=True)
    os.rename(req['path'], req['to'])
    return {}


def f_remove(req):
    import shutil
    p = req['path']
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return {}
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(p)
    else:
        os.unlink(p)
    return {}


def _regular(fd):
    m = os.fstat(fd).st_mode
    if stat.S_ISDIR(m):
        raise OSError(errno.EISDIR, 'is a directory')
    if not stat.S_ISREG(m):
        raise OSError(errno.EINVAL, 'not a regular file')
    return m


def f_open(req):
    global next_fh
    if len(files) >= MAX_FILES:
        raise OSError(errno.EMFILE, 'too many open files')
    p, flags = req['path'], os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    if req.get('write'):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        try:  # refuse a special file before opening it, and again after
            m = os.stat(p).st_mode
            if stat.S_ISDIR(m):
                raise OSError(errno.EISDIR, 'is a directory')
            if not stat.S_ISREG(m):
                raise OSError(errno.EINVAL, 'not a regular file')
        except FileNotFoundError:
            pass
        fd = os.open(p, flags | os.O_WRONLY | os.O_CREAT, 0o666)
    else:
        fd = os.open(p, flags | os.O_RDONLY)
    try:
        _regular(fd)
        if req.get('write'):
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    next_fh += 1
    files[next_fh] = fd
    return {'fh': next_fh, 'size': os.fstat(fd).st_size}


def _fd(req):
    fd = files.get(req.get('fh'))
    if fd is None:
        raise OSError(errno.EBADF, 'no such file handle')
    return fd


def f_read(req):
    return {'data': b64(os.read(_fd(req), FILE_CHUNK))}


def f_write(req):
    fd, b = _fd(req), memoryview(base64.b64decode(req.get('data', '')))
    while b:
        b = b[os.write(fd, b):]
    return {}


def f_close(req):
    fd = _fd(req)
    del files[req['fh']]
    os.close(fd)
    return {}


# Watches: inotify, here in the sandbox as its user, so a watch sees the
# sandbox's files and only those its user may read. Events are read only
# while the host keeps up (flow): past that the kernel's queue
# (max_queued_events) fills and its IN_Q_OVERFLOW is passed on as an
# "overflow" event, so nothing is lost unsaid and nothing grows here.
MAX_WATCHES = 16     # inotify instances (the user's max_user_instances is 128)
MAX_WATCH_DIRS = 10000
IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_DONT_FOLLOW, IN_ISDIR = 0x4000, 0x8000, 0x1000000, 0x2000000, 0x40000000
WATCH_MASK = IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
watches = {}         # wid -> Watch
next_wid = 0
_ilibc = None


def _inotify():
    global _ilibc
    if _ilibc is None:
        if _libc is None:
            raise OSError(errno.ENOSYS, 'watching needs ctypes, which this rootfs lacks')
        _ilibc = ctypes.CDLL(None, use_errno=True)
    return _ilibc


class Watch:
    def __init__(self, wid, root, recursive):
        lib = _inotify()
        self.wid, self.root, self.recursive = wid, root, recursive
        self.fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self.wds = {}    # wd -> path relative to root ('' the root)
        try:
            self.add('', WATCH_MASK)  # the root: followed if a symlink, as envd's os.Stat
            if recursive:
                self.add_tree('')
        except BaseException:
            os.close(self.fd)
            raise
        if not paused:
            sel.register(self.fd, selectors.EVENT_READ, (self.read, None))

    def add(self, rel, mask):
        if len(self.wds) >= MAX_WATCH_DIRS:
            raise OSError(errno.E2BIG, 'more than %d directories to watch' % MAX_WATCH_DIRS)
        p = os.path.join(self.root, rel) if rel else self.root
        wd = _ilibc.inotify_add_watch(self.fd, os.fsencode(p), mask)
        if wd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), p)
        self.wds[wd] = rel

    def add_tree(self, rel):
        todo = [rel]
        while todo:
            d = todo.pop()
            try:
                it = os.scandir(os.path.join(self.root, d) if d else self.root)
            except OSError:
                continue  # gone meanwhile, or not the user's to read
            with it:
                for de in it:
                    if de.is_dir(follow_symlinks=False):
                        r = os.path.join(d, de.name) if d else de.name
                        try:
                            self.add(r, WATCH_MASK | IN_DONT_FOLLOW)
                        except OSError as e:
                            if e.errno in (errno.E2BIG, errno.ENOSPC):  # too many: not silently fewer
                                raise
                            continue  # gone meanwhile, or not the user's to read
                        todo.append(r)

    def forget(self, prefix):
        for wd, r in list(self.wds.items()):
            if r == prefix or r.startswith(prefix + '/'):
                _ilibc.inotify_rm_watch(self.fd, wd)
                del self.wds[wd]

    def read(self, fd, _):
        import struct
        try:
            b = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        evs, off, ended = [], 0, False
        while off + 16 <= len(b):
            wd, mask, _cookie, n = struct.unpack_from('iIII', b, off)
            name = b[off + 16:off + 16 + n].split(b'\0', 1)[0].decode('utf-8', 'surrogateescape')
            off += 16 + n
            if mask & IN_Q_OVERFLOW:
                evs.append(['overflow', ''])
                continue
            rel = self.wds.get(wd)
            if rel is None:
                continue
            if mask & IN_IGNORED:
                del self.wds[wd]
                ended = ended or rel == ''
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                if rel == '':  # the root itself; a subdirectory's parent tells
                    evs.append(['remove' if mask & IN_DELETE_SELF else 'rename', '.'])
                continue
            r = os.path.join(rel, name) if rel else name
            isdir = mask & IN_ISDIR
            if mask & (IN_CREATE | IN_MOVED_TO):
                evs.append(['create', r])
                if isdir and self.recursive:
                    try:
                        self.add(r, WATCH_MASK | IN_DONT_FOLLOW)
                        self.add_tree(r)
                    except OSError as e:
                        if e.errno != errno.ENOENT:  # not gone: its changes will not be seen
                            evs.append(['overflow', r])
            if mask & IN_MOVED_FROM:
                evs.append(['rename', r])
                if isdir and self.recursive:
                    self.forget(r)
            if mask & IN_ATTRIB:
                evs.append(['chmod', r])
            if mask & IN_MODIFY:
                evs.append(['write', r])
            if mask & IN_DELETE:
                evs.append(['remove', r])
        if evs:
            send({'wid': self.wid, 'ev': evs})
        if ended:
            self.close()
            send({'wid': self.wid, 'end': True})

    def close(self):
        if watches.pop(self.wid, None) is None:
            return
        if not paused:
            sel.unregister(self.fd)
        os.close(self.fd)


def f_watch(req):
    global next_wid
    if len(watches) >= MAX_WATCHES:
        raise OSError(errno.EMFILE, 'more than %d watches' % MAX_WATCHES)
    next_wid += 1
    watches[next_wid] = Watch(next_wid, req['path'], bool(req.get('recursive')))
    return {'wid': next_wid}


def f_unwatch(req):
    w = watches.get(req.get('wid'))
    if w is not None:
        w.close()
    return {}


FILE_OPS = {'fstat': f_stat, 'flist': f_list, 'fmkdir': f_mkdir, 'frename': f_rename,
            'fremove': f_remove, 'fopen': f_open, 'fread': f_read, 'fwrite': f_write, 'fclose': f_close,
            'fwatch': f_watch, 'funwatch': f_unwatch, 'fsetmeta': f_setmeta, 'fmeta': f_meta}


def from_host(fd, _):
    try:
        b = os.read(fd, 1 << 16)
    except BlockingIOError:
        return
    if not b:
        raise EOFError
    inbuf.extend(b)
    while len(inbuf) >= 4:
        n = int.from_bytes(inbuf[:4], 'big')
        if n > MAX_FRAME:
            raise EOFError
        if len(inbuf) < 4 + n:
            return
        req = json.loads(bytes(inbuf[4:4 + n]))
        del inbuf[:4 + n]
        try:
            handle(req)
        except Exception as e:
            send({'id': req.get('id'), 'error': '%s: %s' % (type(e).__name__, e)})


def reap(fd, _):
    try:
        os.read(fd, 512)
    except BlockingIOError:
        pass
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        pr = procs.get(pid)
        if pr is not None:  # else an orphan the agent adopted as subreaper
            pr.ended(status)


def flow():
    """Back-pressure: stop reading the processes' pipes while the host is
    behind (they block on a full pipe), resume once it has caught up."""
    global paused
    if not paused and len(out) > HIGH:
        paused = True
        for pr in procs.values():
            for fd in pr.pipes:
                sel.unregister(fd)
        for w in watches.values():
            sel.unregister(w.fd)
    elif paused and len(out) < LOW:
        paused = False
        for pr in procs.values():
            for fd, k in pr.pipes.items():
                sel.register(fd, selectors.EVENT_READ, (pr.read, k))
        for w in watches.values():
            sel.register(w.fd, selectors.EVENT_READ, (w.read, None))
    mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
    if sel.get_key(FD).events != mask:
        sel.modify(FD, mask, (from_host, None))


def to_host(fd):
    try:
        n = os.write(fd, out)
    except BlockingIOError:
        return
    del out[:n]


def main():
    os.environ.pop('MPLBACKEND', None)  # the runner's backend, unknown elsewhere
    if _libc is not None:  # adopt the orphans of started processes, to reap them
        _libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    os.set_blocking(FD, False)
    sel.register(r, selectors.EVENT_READ, (reap, None))
    sel.register(FD, selectors.EVENT_READ, (from_host, None))
    reap(r, None)
    try:
        while True:
            for key, ev in sel.select():
                if sel.get_map().get(key.fd) is not key:
                    # An earlier handler of this round unregistered it (a
                    # process's end closes its terminal and stdin).
                    continue
                if key.fd == FD and ev & selectors.EVENT_WRITE:
                    to_host(FD)
                if key.fd != FD or ev & selectors.EVENT_READ:
                    f, arg = key.data
                    f(key.fd, arg)
            flow()
    except (EOFError, ConnectionError):
        pass
    finally:
        for pid in list(procs):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


main()
