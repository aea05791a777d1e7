"""What the sync and asyncio clients share: request bodies, the retry
policy, error mapping, stream events and Result. No I/O here."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import urllib.parse
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from .errors import BY_CODE, BY_STATUS, InvalidArgument, NsboxError

DEFAULT_SOCKET = "/run/nsbox/nsbox.sock"
API = "/v1"
NDJSON = "application/x-ndjson"

#: The keys of a run's or a session's limits (docs/API.md).
LIMIT_KEYS = ("timeout_ms", "memory_bytes", "pids", "cpus", "disk_bytes", "output_bytes")

#: Seconds added to a run's own time limit for the socket's read deadline:
#: queueing, the sandbox's start and the answer.
RUN_MARGIN = 60.0

Files = Union[Mapping[str, Union[str, bytes]], Sequence[Mapping[str, Any]]]


def resolve_socket(path: Optional[str]) -> str:
    """The socket to use: path, else $NSBOX_SOCKET, else /run/nsbox/nsbox.sock."""
    return path or os.environ.get("NSBOX_SOCKET") or DEFAULT_SOCKET


def unreachable_message(path: str, err: BaseException) -> str:
    if isinstance(err, PermissionError):
        # The daemon may well be running: this user may not use its socket.
        return ("nsbox daemon socket %s: permission denied for uid %d (%s). The socket is "
                "for root and the group nsbox: join it (`sudo usermod -aG nsbox $USER`, then log "
                "in again), or point $NSBOX_SOCKET (or socket_path=) at a socket you may use"
                % (path, os.geteuid(), err))
    return ("nsbox daemon at %s does not answer: %s. Is it running? Start it with "
            "`sudo systemctl start nsbox.socket` (installed) or `sudo nsbox daemon`; "
            "or point $NSBOX_SOCKET (or socket_path=) at the socket of a running daemon" % (path, err))


def cut_off(method: str, path: str) -> NsboxError:
    """The error of an answer the daemon began and did not finish (it
    stopped or crashed mid-run). Never retried: the work may have begun."""
    return NsboxError("internal", "%s %s: the daemon closed the connection mid-answer" % (method, path))


class Retry:
    """When and how long to wait before trying a request again.

    The daemon answers 429 (every run slot or session taken) and 503 (it is
    shutting down) before it starts any work, so the request is safe to send
    again whatever it was. Waits grow exponentially from `backoff` seconds
    with full jitter, up to `max_backoff`; a Retry-After header is honoured
    (never waiting less than it says). At most `attempts` retries, and never
    past `max_wait` seconds of waiting in all. Retry(attempts=0) turns it off.
    """

    def __init__(self, attempts: int = 5, backoff: float = 0.1, max_backoff: float = 5.0, max_wait: float = 60.0):
        if attempts < 0 or backoff < 0 or max_backoff < 0 or max_wait < 0:
            raise ValueError("Retry: attempts, backoff, max_backoff and max_wait must not be negative")
        self.attempts = attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_wait = max_wait

    def __repr__(self) -> str:
        return "Retry(attempts=%d, backoff=%g, max_backoff=%g, max_wait=%g)" % (
            self.attempts, self.backoff, self.max_backoff, self.max_wait)

    def delay(self, attempt: int, err: NsboxError, waited: float) -> Optional[float]:
        """Seconds to wait before retry number attempt (1-based) after err,
        or None when err is final."""
        if err.status not in (429, 503) or attempt > self.attempts:
            return None
        d = random.uniform(0, min(self.max_backoff, self.backoff * (2 ** (attempt - 1))))
        if err.retry_after is not None:
            d = max(d, float(err.retry_after))
        if waited + d > self.max_wait:
            return None
        return d


def retry_policy(retries: Union[Retry, int, None]) -> Retry:
    if retries is None:
        return Retry()
    if isinstance(retries, Retry):
        return retries
    if isinstance(retries, bool) or not isinstance(retries, int):
        raise TypeError("retries: give a number of retries (0: none) or an nsbox.Retry, not %r" % (retries,))
    return Retry(attempts=retries)


def error_from(status: int, body: bytes, retry_after: Optional[str]) -> NsboxError:
    """The typed error of a non-2xx answer."""
    code, message = "internal", "HTTP %d: %s" % (status, body.decode("utf-8", "replace").strip())
    cls = None
    try:
        err = json.loads(body)["error"]
        code, message = err["code"], err["message"]
        cls = BY_CODE.get(code)
    except (ValueError, KeyError, TypeError):
        pass
    retry = int(retry_after) if retry_after and retry_after.strip().isdigit() else None
    return (cls or BY_STATUS.get(status) or NsboxError)(code, message, status, retry)


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument("invalid_argument", message, 400)


def check_limits(limits: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    if limits is None:
        return None
    if not isinstance(limits, Mapping):
        raise _invalid("limits: give a dict with some of %s, not %s" % (", ".join(LIMIT_KEYS), type(limits).__name__))
    unknown = sorted(set(limits) - set(LIMIT_KEYS), key=str)
    if unknown:
        raise _invalid("limits: unknown key%s %s; the known keys are %s" % (
            "s" if len(unknown) > 1 else "", ", ".join(map(repr, unknown)), ", ".join(LIMIT_KEYS)))
    for key, val in limits.items():
        # JSON integers, as the daemon decodes them (cpus may be fractional).
        number = (int, float) if key == "cpus" else (int,)
        if val is not None and (isinstance(val, bool) or not isinstance(val, number)):
            raise _invalid("limits[%r]: give %s, not %s %r" % (
                key, "a number" if key == "cpus" else "an integer", type(val).__name__, val))
    return _put({}, **limits)


def check_imports(allowed_imports: Optional[Iterable[str]]) -> Optional[List[str]]:
    if allowed_imports is None:
        return None
    if isinstance(allowed_imports, str):
        raise _invalid("allowed_imports: give a list of module names, e.g. [%r], not a string" % allowed_imports)
    names = list(allowed_imports)
    for n in names:
        if not isinstance(n, str):
            raise _invalid("allowed_imports: %r is not a module name (str)" % (n,))
    return names


def check_network(network: Any) -> Optional[Dict[str, Any]]:
    """network: a list of hosts (["pypi.org"]) or the API's object
    ({"allow": [...], "secrets": [...], "max_connections": N,
    "max_bytes": N}); None: no network."""
    if network is None:
        return None
    if isinstance(network, str):
        raise _invalid("network: give a list of hosts, e.g. [%r], not a string" % network)
    if isinstance(network, Mapping):
        unknown = sorted(set(network) - {"allow", "secrets", "max_connections", "max_bytes"})
        if unknown:
            raise _invalid("network: unknown keys %s (known: allow, secrets, max_connections, max_bytes)" % ", ".join(unknown))
        out = dict(network)
    else:
        out = {"allow": list(network)}
    for key in ("allow", "secrets"):
        vals = out.get(key)
        if vals is None:
            continue
        if isinstance(vals, str) or not all(isinstance(v, str) for v in vals):
            raise _invalid("network[%r]: give a list of str, not %r" % (key, vals))
        out[key] = list(vals)
    return out


def files_list(files: Optional[Files]) -> Optional[List[Dict[str, Any]]]:
    """{path: str|bytes} (or a list of API file objects) -> the API's list."""
    if files is None:
        return None
    if isinstance(files, Mapping):
        out = []
        for path, content in files.items():
            if isinstance(content, (bytes, bytearray, memoryview)):
                out.append({"path": path, "content_base64": base64.b64encode(bytes(content)).decode("ascii")})
            elif isinstance(content, str):
                out.append({"path": path, "text": content})
            else:
                raise _invalid("files[%r]: give str or bytes, not %s" % (path, type(content).__name__))
        return out
    return [dict(f) for f in files]


_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def check_volumes(volumes: Any) -> Optional[List[Dict[str, Any]]]:
    """volumes: named volumes to mount under /mnt, each a name ("data",
    at /mnt/data), "name:/mnt/path", "name:ro", "name:/mnt/path:ro", or the
    API's object ({"name": ..., "path": ..., "read_only": ...})."""
    if volumes is None:
        return None
    if isinstance(volumes, (str, Mapping)):
        raise _invalid("volumes: give a list, e.g. [\"data\"] or [{\"name\": \"data\", \"read_only\": True}]")
    out = []
    for v in volumes:
        if isinstance(v, str):
            parts = v.split(":")
            m: Dict[str, Any] = {"name": parts[0]}
            for p in parts[1:]:
                if p == "ro":
                    m["read_only"] = True
                elif p == "rw":
                    pass
                elif p.startswith("/mnt/") and "path" not in m:
                    m["path"] = p
                else:
                    raise _invalid("volumes: %r: use NAME[:/mnt/PATH][:ro]" % v)
        elif isinstance(v, Mapping):
            unknown = sorted(set(v) - {"name", "path", "read_only"})
            if unknown:
                raise _invalid("volumes: unknown keys %s (known: name, path, read_only)" % ", ".join(unknown))
            m = dict(v)
        else:
            raise _invalid("volumes: each is a name or a dict, not %s" % type(v).__name__)
        if not isinstance(m.get("name"), str) or not _NAME_RE.match(m["name"]):
            raise _invalid("volumes: name %r: 1-63 of a-z, 0-9, '.', '_', '-'" % (m.get("name"),))
        out.append(m)
    return out


def check_datasets(datasets: Any) -> Optional[List[str]]:
    """datasets: names of the operator's read-only datasets (info()["datasets"])."""
    if datasets is None:
        return None
    if isinstance(datasets, str) or not all(isinstance(d, str) for d in datasets):
        raise _invalid("datasets: give a list of dataset names, e.g. [\"corpus\"] (info()[\"datasets\"] lists them)")
    return list(datasets)


def volume_path(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _invalid("volume name %r: 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit" % (name,))
    return "%s/volumes/%s" % (API, name)


def volume_file_url(name: str, path: str) -> str:
    _check_rel(path, "the volume")
    return "%s/files/%s" % (volume_path(name), urllib.parse.quote(path, safe="/"))


def _put(req: Dict[str, Any], **fields: Any) -> Dict[str, Any]:
    for key, val in fields.items():
        if val is not None:
            req[key] = val
    return req


def run_body(code: Optional[str], argv: Optional[Sequence[str]], language: str, files: Optional[Files],
             limits: Optional[Mapping[str, Any]], stdin: Optional[str], env: Optional[Mapping[str, str]],
             rootfs: Optional[str], profile: Optional[str], return_files: Optional[Sequence[str]],
             allowed_imports: Optional[Iterable[str]], network: Any = None, volumes: Any = None,
             datasets: Any = None, init: bool = False) -> Dict[str, Any]:
    """The body of POST /v1/runs, checked for what the client can see."""
    if not isinstance(init, bool):
        raise TypeError("init: give True or False, not %r" % (init,))
    if (code is None) == (argv is None):
        raise ValueError("give exactly one of code or argv")
    if argv is not None:
        if isinstance(argv, str) or not all(isinstance(a, str) for a in argv):
            raise TypeError("argv: give a list of str, e.g. ['python3', 'x.py'], not %r" % (argv,))
        req: Dict[str, Any] = {"argv": list(argv)}
    else:
        if not isinstance(code, str):
            raise TypeError("code must be a str of source code, not %s" % type(code).__name__)
        req = {"language": language, "code": code}
    return _put(req, files=files_list(files), limits=check_limits(limits), stdin=stdin,
                env=dict(env) if env is not None else None, rootfs=rootfs, profile=profile,
                return_files=list(return_files) if return_files is not None else None,
                allowed_imports=check_imports(allowed_imports), network=check_network(network),
                volumes=check_volumes(volumes), datasets=check_datasets(datasets), init=init or None)


#: The run() arguments a batch's run may carry.
RUN_ARGS = ("code", "argv", "language", "files", "limits", "stdin", "env", "rootfs", "profile", "return_files",
            "allowed_imports", "network", "volumes", "datasets", "init")


def batch_body(runs: Iterable[Mapping[str, Any]], concurrency: Optional[int]) -> Dict[str, Any]:
    """The body of POST /v1/runs:batch: each run a dict of run() arguments."""
    out = []
    for i, r in enumerate(runs):
        if not isinstance(r, Mapping):
            raise TypeError("runs[%d]: give a dict of run() arguments, e.g. {\"code\": \"print(1)\"}, not %s"
                            % (i, type(r).__name__))
        unknown = sorted(set(r) - set(RUN_ARGS))
        if unknown:
            raise TypeError("runs[%d]: unknown run() arguments %s (known: %s)" % (i, ", ".join(unknown), ", ".join(RUN_ARGS)))
        try:
            out.append(run_body(r.get("code"), r.get("argv"), r.get("language", "python"), r.get("files"),
                                r.get("limits"), r.get("stdin"), r.get("env"), r.get("rootfs"), r.get("profile"),
                                r.get("return_files"), r.get("allowed_imports"), r.get("network"),
                                r.get("volumes"), r.get("datasets"), r.get("init", False)))
        except (TypeError, ValueError) as e:
            raise type(e)("runs[%d]: %s" % (i, e)) from e
    body: Dict[str, Any] = {"runs": out}
    if concurrency is not None:
        body["concurrency"] = concurrency
    return body


class BatchAnswer:
    """Collects a batch's answer, line by line, for both clients."""

    def __init__(self, n: int):
        self.results: List[Any] = [None] * n

    def take(self, line: bytes, what: str) -> Tuple[Optional["Batch"], Optional[Tuple[int, Any]]]:
        """(the Batch, None) on the done line; (None, (index, Result or
        NsboxError)) on a run's; raises the batch's own error."""
        kind, index, val = batch_item(line, what)
        if kind == "done":
            return Batch(self.results, val), None
        if kind and 0 <= index < len(self.results):
            self.results[index] = val
            return None, (index, val)
        if kind == "error":
            raise val
        return None, None


def batch_item(line: bytes, what: str) -> Tuple[str, int, Any]:
    """One line of a batch's answer -> ("result", index, Result),
    ("error", index, NsboxError) or ("done", -1, the summary dict); ("",
    -1, None) for a blank or unknown line."""
    it = json_object(line, what)
    kind, index = it.get("type"), it.get("index", -1)
    if kind == "result":
        return kind, index, Result(it["result"])
    if kind == "error":
        err = it.get("error") or {}
        code = err.get("code", "internal")
        return kind, index, BY_CODE.get(code, NsboxError)(code, err.get("message", "batch error"))
    if kind == "done":
        return kind, -1, it.get("done") or {}
    return "", -1, None


def session_body(rootfs: Optional[str], limits: Optional[Mapping[str, Any]], idle_timeout_ms: Optional[int],
                 env: Optional[Mapping[str, str]], files: Optional[Files], lifetime_ms: Optional[int],
                 allowed_imports: Optional[Iterable[str]], idle_action: Optional[str],
                 network: Any = None, language: Optional[str] = None, volumes: Any = None,
                 datasets: Any = None, lifetime_action: Optional[str] = None, init: bool = False,
                 processes: bool = False) -> Dict[str, Any]:
    if not isinstance(init, bool):
        raise TypeError("init: give True or False, not %r" % (init,))
    if not isinstance(processes, bool):
        raise TypeError("processes: give True or False, not %r" % (processes,))
    if idle_action not in (None, "end", "pause", "park"):
        raise _invalid("idle_action %r: use \"end\", \"pause\" or \"park\"" % (idle_action,))
    if lifetime_action not in (None, "end", "park"):
        raise _invalid("lifetime_action %r: use \"end\" or \"park\"" % (lifetime_action,))
    if language not in (None, "python", "javascript", "typescript"):
        raise _invalid("language %r: a session runs \"python\", \"javascript\" or \"typescript\"" % (language,))
    return _put({}, rootfs=rootfs, language=language, limits=check_limits(limits), idle_timeout_ms=idle_timeout_ms,
                env=dict(env) if env is not None else None, files=files_list(files), lifetime_ms=lifetime_ms,
                allowed_imports=check_imports(allowed_imports), idle_action=idle_action,
                lifetime_action=lifetime_action, network=check_network(network), volumes=check_volumes(volumes), datasets=check_datasets(datasets),
                init=init or None, processes=processes or None)


def fork_body(count: int) -> Dict[str, Any]:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 16:
        raise _invalid("count %r: a fork makes 1 to 16 branches" % (count,))
    return {"count": count}


def exec_body(code: str, timeout_ms: Optional[int], context: Optional[str] = None,
              env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    if not isinstance(code, str):
        raise TypeError("code must be a str of source code, not %s" % type(code).__name__)
    if timeout_ms is not None and (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int)):
        raise TypeError("timeout_ms: give an integer (milliseconds), not %s %r" % (type(timeout_ms).__name__, timeout_ms))
    req: Dict[str, Any] = {"code": code}
    if timeout_ms:
        req["timeout_ms"] = timeout_ms
    if context is not None:
        if not isinstance(context, str):
            raise TypeError("context: give a str (a namespace's name), not %s" % type(context).__name__)
        if context:
            req["context"] = context
    if env:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise TypeError("env: give a mapping of str to str")
        req["env"] = dict(env)
    return req


class ClientBase:
    """What nsbox.Client and nsbox.AsyncClient share: the socket, the
    deadlines and the retry policy (see nsbox.Client)."""

    def __init__(self, socket_path: Optional[str] = None, timeout: Optional[float] = 60.0,
                 connect_timeout: float = 10.0, retries: Union[Retry, int, None] = None,
                 queue_timeout: Optional[float] = 600.0):
        self.socket_path = resolve_socket(socket_path)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.queue_timeout = queue_timeout
        self.retry = retry_policy(retries)
        # The daemon's default run timeout and its profiles' (name -> ms),
        # read from /v1/info by the first run that names no timeout_ms.
        self._timeouts: Optional[Dict[str, float]] = None

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.socket_path)

    def _deadline(self, timeout_ms: Optional[float], fallback_ms: Optional[float]) -> Optional[float]:
        """The socket deadline of a run or exec (None: no deadline): its
        time limit (else fallback_ms, else ten minutes) plus timeout."""
        if self.timeout is None:
            return None
        return (timeout_ms or fallback_ms or 600_000) / 1000.0 + self.timeout

    def _queue_deadline(self) -> Optional[float]:
        """How long a run may wait for its answer to start: the daemon's
        queue (a run slot) plus timeout. None: no limit."""
        if self.timeout is None or self.queue_timeout is None:
            return None
        return self.queue_timeout + self.timeout

    def _queue_message(self, path: str, waited: Optional[float]) -> str:
        return ("POST %s: the run did not start within %ss: the nsbox daemon at %s kept it queued for a run slot "
                "(all were busy). Raise queue_timeout=, or the daemon's max_concurrent" % (path, waited, self.socket_path))

    def _batch_deadline_of(self, runs: Sequence[Mapping[str, Any]]) -> Optional[float]:
        """A batch's read deadline between two answers: the slowest run's
        own deadline plus the queue's (its runs wait for run slots)."""
        q = self._queue_deadline()
        if q is None:
            return None
        return max(self._run_deadline_of(r) or 0.0 for r in runs) + q

    def _needs_timeouts(self, req: Mapping[str, Any]) -> bool:
        """Whether the deadline of run request req needs /v1/info first."""
        return self.timeout is not None and not (req.get("limits") or {}).get("timeout_ms") and self._timeouts is None

    def _learn_timeouts(self, info: Mapping[str, Any]) -> None:
        t = {"": float((info.get("default_limits") or {}).get("timeout_ms") or 0)}
        for p in info.get("profiles") or []:
            t[p.get("name", "")] = float((p.get("limits") or {}).get("timeout_ms") or 0)
        self._timeouts = t

    def _run_deadline_of(self, req: Mapping[str, Any]) -> Optional[float]:
        """The deadline of run request req: its timeout_ms, else its
        profile's (a profile's limits fill those the request leaves out),
        else the daemon's default."""
        t = self._timeouts or {}
        return self._deadline((req.get("limits") or {}).get("timeout_ms"),
                              t.get(req.get("profile") or "") or t.get(""))


def exec_fallback_ms(created: Optional[Mapping[str, Any]]) -> Optional[float]:
    """A session's default exec timeout, from its creation answer."""
    return ((created or {}).get("limits") or {}).get("timeout_ms")


def session_path(session_id: str) -> str:
    return "%s/sessions/%s" % (API, urllib.parse.quote(session_id, safe=""))


def _check_rel(path: Any, where: str) -> None:
    # Checked here as the daemon would: a URL with ".." or "//" would be
    # cleaned (and redirected) before the daemon saw the path.
    if not isinstance(path, str) or not path or path.startswith("/") or "\x00" in path or \
            any(e in ("", ".", "..") for e in path.split("/")):
        raise _invalid("path %r: give a clean path relative to %s (no leading /, no . or .. elements)" % (path, where))


def file_url(session_id: str, path: str) -> str:
    _check_rel(path, "/workspace")
    return "%s/files/%s" % (session_path(session_id), urllib.parse.quote(path, safe="/"))


def upload_bytes(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        out = data.read()
        return out.encode("utf-8") if isinstance(out, str) else bytes(out)
    raise TypeError("data: give bytes, str or a file object, not %s" % type(data).__name__)


def json_object(data: bytes, what: str) -> Dict[str, Any]:
    """The JSON object of an answer or event ({} for an empty body)."""
    if not data.strip():
        return {}
    try:
        obj = json.loads(data)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise NsboxError("internal", "%s: not a JSON object: %r" % (what, data[:80]))
    return obj


def listed(answer: Mapping[str, Any], key: str) -> List[Dict[str, Any]]:
    """The list answer[key] of a listing (GET /v1/sessions, .../files)."""
    return list(answer.get(key) or [])


def stream_event(line: bytes, what: str) -> Tuple[str, Union[str, Result, None]]:
    """One NDJSON event -> ("stdout"|"stderr", text), ("result", Result),
    or raises the stream's error; ("", None) for a blank or unknown line."""
    ev = json_object(line, what)
    kind = ev.get("type")
    if kind in ("stdout", "stderr"):
        data = ev.get("data")
        if data is None and "data_base64" in ev:
            data = base64.b64decode(ev["data_base64"]).decode("utf-8", "replace")
        return kind, data or ""
    if kind == "result":
        return kind, Result(ev["result"])
    if kind == "error":
        err = ev.get("error") or {}
        code = err.get("code", "internal")
        raise BY_CODE.get(code, NsboxError)(code, err.get("message", "stream error"))
    return "", None


def watch_path(session_id: str, path: str, recursive: bool) -> str:
    """The URL path of GET /v1/sessions/{id}/watch."""
    if not isinstance(recursive, bool):
        raise TypeError("recursive: give True or False, not %r" % (recursive,))
    q = urllib.parse.urlencode({"path": path, **({"recursive": "1"} if recursive else {})})
    return API + "/sessions/" + urllib.parse.quote(session_id, safe="") + "/watch?" + q


def watch_event(line: bytes, what: str) -> Optional[Dict[str, Any]]:
    """One line of a watch: the change (a dict: type, name), None at its
    "end"; raises the session's error at "error"."""
    ev = json_object(line, what)
    if ev.get("type") == "end":
        return None
    if ev.get("type") == "error":
        err = ev.get("error") or {}
        code = err.get("code", "internal")
        raise BY_CODE.get(code, NsboxError)(code, err.get("message", "watch error"))
    return ev


C = TypeVar("C")


def callback(kind: str, on_stdout: Optional[C], on_stderr: Optional[C]) -> Optional[C]:
    """The stream callback for an event kind (None for a result or none)."""
    return on_stdout if kind == "stdout" else on_stderr if kind == "stderr" else None


class Batch:
    """The answer of run_batch: results[i] is the Result of runs[i], or the
    NsboxError it got (invalid, cancelled); summary the daemon's counts
    (runs, ok, failed, errors, wall_ms)."""

    def __init__(self, results: List[Any], summary: Mapping[str, Any]):
        self.results = results
        self.summary = dict(summary)

    def __repr__(self) -> str:
        return "Batch(%r)" % (self.summary,)

    @property
    def ok(self) -> bool:
        """Every run ended with status ok."""
        return all(isinstance(r, Result) and r.ok for r in self.results)


class Result:
    """The result of a run or an exec (docs/API.md, "Result").

    Every field of the JSON is an attribute (missing ones are None):
    status, exit_code, stdout, stderr, value, exception ({name, value,
    traceback}), value_data (a DataFrame's {column: [values]}), files,
    wall_ms, execution_count, ... .figures holds the figures as PNG bytes,
    .charts their charts; .raw the JSON object.
    """

    def __init__(self, raw: Dict[str, Any]):
        self.raw = raw

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.raw.get(name)

    @property
    def status(self) -> str:
        """ok, exception, exit_nonzero, timeout, oom, output_limit, killed, error, ..."""
        return self.raw.get("status", "")

    @property
    def stdout(self) -> str:
        return self.raw.get("stdout", "")

    @property
    def stderr(self) -> str:
        return self.raw.get("stderr", "")

    @property
    def exception(self) -> Optional[Dict[str, str]]:
        """{name, value, traceback} when the Python code raised."""
        return self.raw.get("exception")

    @property
    def ok(self) -> bool:
        """True when the code ran to its end (status "ok")."""
        return self.raw.get("status") == "ok"

    @property
    def figures(self) -> List[bytes]:
        """The matplotlib figures, each as PNG bytes."""
        return [base64.b64decode(f["data_base64"]) for f in self.raw.get("figures") or []]

    @property
    def charts(self) -> List[Optional[Dict[str, Any]]]:
        """Each figure's chart (docs/API.md, "Charts"): its type, title,
        axes and elements; None for an image that has none."""
        return [f.get("chart") for f in self.raw.get("figures") or []]

    def file(self, path: str) -> bytes:
        """The content of a returned file (RunRequest return_files)."""
        for f in self.raw.get("files") or []:
            if f["path"] == path and "content_base64" in f:
                return base64.b64decode(f["content_base64"])
        raise KeyError(path)

    def __repr__(self) -> str:
        return "Result(status=%r, exit_code=%r, value=%r)" % (self.status, self.exit_code, self.value)
