# nsbox process agent. The runner starts it (a fresh python3 -I -S) with FD,
# one end of a socketpair the host made, passed over the runner's control
# socket. It starts processes and passes their output on; frames both ways
# are a 4-byte big-endian length, then JSON (bytes as base64).
#
# host -> agent: {"id", "op": "start", "cmd", "args", "env", "cwd", "stdin"}
#                {"id", "op": "input", "pid", "data"} | {"id", "op": "close_stdin", "pid"}
#                {"id", "op": "signal", "pid", "signal"}
# agent -> host: {"id", "pid"} (started) | {"id"} (done) | {"id", "error", "kind"}
#                {"pid", "out" | "err": data} | {"pid", "end": true, "code" | "signal"}
try:  # first: non-dumpable, so that same-uid code in the sandbox (a cell,
    # a command) can neither open /proc/<agent>/mem nor ptrace it to forge
    # frames; the agent starts before any user code runs in its sandbox
    import ctypes
    _libc = ctypes.CDLL(None)
    _libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
except Exception:  # a rootfs without ctypes: docs/SECURITY.md
    _libc = None
import os, json, signal, selectors, subprocess, base64, errno

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
    def __init__(self, p):
        self.p, self.pid = p, p.pid
        self.pipes = {}            # fd -> 'out' | 'err'
        self.stdin = p.stdin.fileno() if p.stdin else -1
        self.inq = []              # [id, bytes] not yet written to stdin
        self.close_id = None       # a close_stdin waiting for inq
        for f, k in ((p.stdout, 'out'), (p.stderr, 'err')):
            os.set_blocking(f.fileno(), False)
            self.pipes[f.fileno()] = k
            if not paused:
                sel.register(f.fileno(), selectors.EVENT_READ, (self.read, k))
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
        self.p.stdin.close()
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


def start(req):
    env = dict(os.environ)
    env.update(req.get('env') or {})
    node_options(env)
    argv = [req['cmd']] + list(req.get('args') or [])
    cwd = req.get('cwd') or default_cwd()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if req.get('stdin') else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                             start_new_session=True, bufsize=0)
    except OSError as e:
        what = 'cwd' if e.filename == cwd and e.filename != req['cmd'] else 'cmd'
        kind = 'not_found' if e.errno == errno.ENOENT else 'start'
        send({'id': req['id'], 'error': '%s %r: %s' % ('working directory' if what == 'cwd' else 'command', e.filename or req['cmd'], e.strerror),
              'kind': kind + '_' + what})
        return
    send({'id': req['id'], 'pid': p.pid})
    procs[p.pid] = Proc(p)


def handle(req):
    op = req.get('op')
    if op == 'start':
        return start(req)
    pr = procs.get(req.get('pid'))
    if pr is None:
        return send({'id': req['id'], 'error': 'no process %s' % req.get('pid'), 'kind': 'not_found'})
    if op == 'signal':
        try:
            os.killpg(pr.pid, req['signal'])
        except ProcessLookupError:
            pass  # the group is gone; its end is on its way
        except OSError as e:
            return send({'id': req['id'], 'error': e.strerror})
        return send({'id': req['id']})
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
    elif paused and len(out) < LOW:
        paused = False
        for pr in procs.values():
            for fd, k in pr.pipes.items():
                sel.register(fd, selectors.EVENT_READ, (pr.read, k))
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
