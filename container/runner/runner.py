# nsbox Python runner: executes cells sent over fd 3 in a persistent
# __main__ namespace. Frames are a 4-byte big-endian length then JSON.
import os, sys, json, signal, ast, linecache, traceback, time, site, importlib

_CTL = 3
_REPR_CAP = 65536
_ns = sys.modules['__main__'].__dict__
_own = globals()  # the runner's: bootstrap runs it in a module of its own
sys.argv[:] = ['']
_shown = []
# The runner's own pid: a process forked by a cell (os.fork, multiprocessing,
# joblib) that comes back into the runner's code is not the runner and must
# never speak its protocol nor run its loop.
_PID = os.getpid()


def _forget_ctl():
    # After a fork, in the child: the control socket is the runner's alone.
    try:
        os.close(_CTL)
    except OSError:
        pass


os.register_at_fork(after_in_child=_forget_ctl)

# The sandbox's stdout is a pipe, which Python fills in 8 KiB blocks, and -I
# ignores the PYTHONUNBUFFERED the sandbox sets: a cell's prints would reach
# the host only as it ends. A cell whose caller streams its output is run
# line-buffered, as on a terminal: each line is passed on as it is printed,
# with one write (python3 -u's unbuffered streams take two per print() and
# were slower still). A cell nobody watches keeps the 8 KiB blocks, which
# are 4-5 times faster on floods of short lines.
def _buffering(stream):
    for f in (sys.stdout, sys.stderr):
        if f.line_buffering != stream:
            f.reconfigure(line_buffering=stream)


def _read(n):
    b = b''
    while len(b) < n:
        c = os.read(_CTL, n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def _recv():
    n = int.from_bytes(_read(4), 'big')
    return json.loads(_read(n))


def _send(obj):
    b = json.dumps(obj, separators=(',', ':')).encode()
    b = len(b).to_bytes(4, 'big') + b
    while b:
        b = b[os.write(_CTL, b):]


def _figures(close=True):
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is None:
        return []
    import io, base64
    out = []
    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format='png')
            out.append({'mime': 'image/png', 'data_base64': base64.b64encode(buf.getvalue()).decode()})
        except Exception as e:
            print('nsbox: figure %d could not be saved: %r' % (num, e), file=sys.stderr)
    if close:
        plt.close('all')
    return out


def _show(*args, **kwargs):
    _shown.extend(_figures())


class _BackendFinder:
    """Imports MPLBACKEND's module on first use: Agg with a non-blocking
    show() that captures the figures shown."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != 'nsbox_mpl_backend':
            return None
        import importlib.machinery
        return importlib.machinery.ModuleSpec(name, _BackendFinder)

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(mod):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        mod.FigureCanvas = FigureCanvasAgg
        mod.show = _show


sys.meta_path.append(_BackendFinder)
os.environ['MPLBACKEND'] = 'module://nsbox_mpl_backend'


def _user_tb(tb):
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith('<cell '):
        tb = tb.tb_next
    return tb


def _exception(e):
    te = traceback.TracebackException(type(e), e, _user_tb(e.__traceback__))
    # A KeyboardInterrupt ends in the runner's own handler (_interrupt).
    while te.stack and te.stack[-1].filename == '<nsbox-runner>':
        te.stack.pop()
    return {'name': type(e).__name__, 'value': str(e), 'traceback': ''.join(te.format())}


def _user_site():
    """Puts ~/.local's site-packages (/workspace/.local: what `pip install`
    writes, the rootfs being read-only) on sys.path once it exists, ahead
    of the system's packages as python3 without -I would: a package
    installed in one cell imports in the next."""
    p = site.getusersitepackages()
    if p in sys.path or not os.path.isdir(p):
        return
    at = next((i for i, e in enumerate(sys.path) if e.endswith('-packages')), len(sys.path))
    sys.path.insert(at, p)
    importlib.invalidate_caches()


def _run(count, code, ns=_ns, ctx=''):
    name = '<cell %s:%d>' % (ctx, count) if ctx else '<cell %d>' % count
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = compile(code, name, 'exec', ast.PyCF_ONLY_AST)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, 'exec'), ns)
    if last is not None:
        v = eval(compile(last, name, 'eval'), ns)
        if v is not None:
            ns['_'] = v
            r = repr(v)
            if len(r) > _REPR_CAP:
                r = r[:_REPR_CAP] + '...'
            return r
    return None


def _setup(names):
    import importlib
    skipped = []
    for n in names:
        try:
            importlib.import_module(n)
        except Exception:
            skipped.append(n)
    # Warm the cell path once (compile, exec, eval, figures) so that the
    # first real cell does not pay for it.
    tree = compile('None', '<setup>', 'exec', ast.PyCF_ONLY_AST)
    last = ast.Expression(tree.body.pop().value)
    ns = {}
    exec(compile(tree, '<setup>', 'exec'), ns)
    eval(compile(last, '<setup>', 'eval'), ns)
    _figures()
    # Collect now and move what start-up and the imports made out of the
    # collector's sight (gc.freeze), so that the first cells do not pay
    # for a full collection of it.
    import gc
    gc.collect()
    gc.freeze()
    return skipped


# allowed_imports: the modules a cell's own code may import. A policy aid
# for the agent's developer, not a security boundary (the sandbox is): code
# can reach a module that is already loaded through an allowed one. Only
# imports made by the cell's own code (the cell, functions and classes it
# defines, what it exec()s) are checked, through __import__ and
# importlib.import_module; modules import what they need, so an allowed
# pandas still imports os. Installed at the first restricted cell, and it
# stays: a runner serves one run, or one session whose execs carry one list.
class _Imports:
    allowed = None

    @classmethod
    def restrict(cls, names):
        if cls.allowed is None:
            import builtins, importlib
            real_import, real_import_module = builtins.__import__, importlib.import_module

            def __import__(name, globals=None, locals=None, fromlist=(), level=0):
                if cls.from_cell(sys._getframe(1)):
                    cls.check(name, fromlist, level)
                return real_import(name, globals, locals, fromlist, level)

            def import_module(name, package=None):
                if cls.from_cell(sys._getframe(1)):
                    cls.check(name, (), 1 if name.startswith('.') else 0)
                return real_import_module(name, package)

            builtins.__import__, importlib.import_module = __import__, import_module
        cls.allowed = tuple(names)

    @staticmethod
    def from_cell(frame):
        g = frame.f_globals
        if g is _ns:
            return True
        if g is _own:  # the runner's code (figures, the matplotlib backend)
            return False
        # A module's code runs in its dict, which has a __spec__ (a module
        # may have swapped its sys.modules entry); exec() with a plain dict
        # has none.
        mod = sys.modules.get(g.get('__name__'))
        return getattr(mod, '__dict__', None) is not g and '__spec__' not in g

    @classmethod
    def permitted(cls, name):
        return any(name == a or name.startswith(a + '.') for a in cls.allowed)

    @classmethod
    def check(cls, name, fromlist, level):
        if level == 0 and (cls.permitted(name) or
                           (fromlist and '*' not in fromlist and
                            all(cls.permitted(name + '.' + f) for f in fromlist))):
            return
        what = ('.' * level + name) if level else name
        raise ImportError('import of %r is not allowed: allowed_imports is %r' % (what, list(cls.allowed)), name=name)


def _restore_env(saved):
    # A cell's own environment variables (ExecRequest.Env) end with it.
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass


# The host sends one SIGINT to interrupt a cell (its timeout, its output
# cap). It may land as the cell ends; past the cell it must not raise.
_in_cell = False


def _interrupt(signum, frame):
    if _in_cell:
        raise KeyboardInterrupt


def _child_exit(rep):
    """A child forked by the cell finished the cell's code: it ends there,
    as a forked script would, and leaves the answer to the runner."""
    exc = rep.get('exception')
    try:
        if exc:
            sys.stderr.write(exc['traceback'])
    finally:
        _flush()
        os._exit(1 if exc else 0)


# Named contexts: a request's 'context' (not empty) runs the cell in a
# namespace of its own, with its own execution count; no 'context' is the
# default __main__, as before contexts. 'drop_context' forgets one (the
# default is emptied): its next cell starts fresh, at count 1.
_contexts = {}


def _fresh(ns):
    import builtins
    ns.clear()
    ns.update(__name__='__main__', __builtins__=builtins)
    return ns


def _drop(cid):
    if cid:
        return {'dropped': _contexts.pop(cid, None) is not None}
    _fresh(_ns)
    return {'dropped': True}


_agent_proc = None  # the process agent, once started (kept: its Popen reaps it)


def _agent(req):
    """Starts the process agent. The host sends one byte with one fd (a
    socketpair end, SCM_RIGHTS) right after the request's frame; read()
    would drop the fd, so that byte alone is read with recvmsg. The agent
    is a fresh interpreter (vfork and exec), not a fork of this one: a
    fork copies the page tables of everything the runner imported, ~8 ms
    with pandas, on the path of a sandbox's creation; the new interpreter
    starts beside the caller instead, and the host's first request waits
    in the socket until it reads."""
    import socket, array, subprocess
    global _agent_proc
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, _CTL)
    try:
        msg, anc, _, _ = s.recvmsg(1, socket.CMSG_SPACE(16), socket.MSG_CMSG_CLOEXEC)
    finally:
        s.detach()
    fds = array.array('i')
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    if msg != b'\0' or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return {'error': 'agent: expected one byte with one fd, got %r with %d' % (msg, len(fds))}
    try:
        _agent_proc = subprocess.Popen(
            [sys.executable, '-I', '-S', '-c', 'FD = %d\n' % fds[0] + req['source']],
            pass_fds=(fds[0],), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except BaseException as e:
        return {'error': 'agent: %r' % e}
    finally:
        os.close(fds[0])
    return {'agent_pid': _agent_proc.pid}


def main():
    count = 0
    _send({'ready': True})
    while True:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            req = _recv()
        except EOFError:
            return
        if 'drop_context' in req:
            rep = _drop(req['drop_context'])
            if not req['drop_context']:
                count = 0
            _send(rep)
            continue
        if req.get('agent'):
            _send(_agent(req))
            continue
        cid = req.get('context')
        setup = req.get('setup')
        if cid:
            c = _contexts.get(cid)
            if c is None:
                c = _contexts[cid] = [_fresh({}), 0]
            c[1] += 1
            n, ns = c[1], c[0]
        else:
            if not setup:
                count += 1
            n, ns = count, _ns
        rep = {'count': n}
        global _in_cell
        try:
            _in_cell = True
            signal.signal(signal.SIGINT, _interrupt)
            try:
                if setup:
                    rep['skipped'] = _setup(req.get('preimport') or [])
                else:
                    if 'allowed_imports' in req:
                        _Imports.restrict(req['allowed_imports'])
                    _buffering(bool(req.get('stream')))
                    _user_site()
                    env = req.get('env')
                    saved = {k: os.environ.get(k) for k in env} if env else None
                    t0 = time.monotonic()
                    try:
                        if env:
                            os.environ.update(env)
                        v = _run(n, req['code'], ns, cid)
                    finally:
                        if saved:
                            _restore_env(saved)
                        # The cell's own time, from inside the sandbox: a
                        # host that looks late (stopped, starved) judges
                        # the timeout by it, not by when it looked.
                        rep['elapsed_us'] = int((time.monotonic() - t0) * 1e6)
                    if v is not None:
                        rep['value'] = v
            except SystemExit as e:
                if e.code not in (None, 0):
                    rep['exception'] = _exception(e)
            except BaseException as e:
                rep['exception'] = _exception(e)
            figs = _shown + _figures()
            _shown.clear()
            if figs:
                rep['figures'] = figs
            _in_cell = False
        except KeyboardInterrupt as e:
            _in_cell = False
            rep['exception'] = _exception(e)
        if os.getpid() != _PID:
            _child_exit(rep)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _flush()
        m = req['marker'].encode()
        for fd in (1, 2):
            try:
                os.write(fd, m)
            except OSError:
                rep['unmarked'] = True
        _send(rep)


main()
