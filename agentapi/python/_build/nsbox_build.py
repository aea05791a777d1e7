"""The nsbox package's build backend (PEP 517, PEP 660), standard library only.

pyproject.toml names it in-tree (backend-path), with no build requirements,
so `pip install ./agentapi/python` needs nothing from an index on any Python
3.9+ with pip: Debian's, pyenv's, conda's, uv's. setuptools needed
setuptools>=61 from PyPI, and Debian's setuptools wheel (the offline way)
runs only on Debian's Python (AttributeError: install_layout elsewhere).
The package is pure Python with no dependencies, so a wheel is a zip of its
files plus METADATA, WHEEL and RECORD; nothing is written into the source
tree (no build/, no *.egg-info).

    python3 agentapi/python/_build/nsbox_build.py DIR   # writes DIR/nsbox-VERSION-py3-none-any.whl
"""

import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ["nsbox"]        # with its py.typed
MODULES = ["nsbox_client"]  # the deprecated one-file client's name, for one release
TAG = "py3-none-any"
# A zip entry's time: SOURCE_DATE_EPOCH when set (reproducible builds), else
# zip's earliest, so that two builds of the same files are the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _project():
    """The [project] table of pyproject.toml: the subset of TOML it uses
    (strings, arrays of strings, over several lines), read without tomllib,
    which Python 3.9 and 3.10 lack."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table, out, pending = None, {}, None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if pending is not None:
            pending[1].append(line)
            if line.startswith("]"):
                out[pending[0]] = _strings(" ".join(pending[1]))
                pending = None
            continue
        if not line:
            continue
        if line.startswith("["):
            table = line.strip("[]").strip()
            continue
        if table != "project":
            continue
        key, _, value = (p.strip() for p in line.partition("="))
        if value.startswith("[") and not value.endswith("]"):
            pending = (key, [value])
        elif value.startswith("["):
            out[key] = _strings(value)
        else:
            out[key] = _strings(value)[0]
    for key in ("name", "version"):
        if key not in out:
            raise ValueError("pyproject.toml: [project] has no %s" % key)
    return out


def _strings(value):
    return [s.encode().decode("unicode_escape") for s in re.findall(r'"((?:[^"\\]|\\.)*)"', value)]


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if "description" in p:
        lines.append("Summary: " + p["description"])
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    lines += ["Classifier: " + c for c in p.get("classifiers", [])]
    lines += ["Requires-Dist: " + d for d in p.get("dependencies", [])]
    body = ""
    if "readme" in p:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = "\n" + f.read()
    return p, ("\n".join(lines) + "\n" + body).encode()


def _sources():
    """(path in the wheel, path on disk) of every file the wheel carries."""
    for pkg in PACKAGES:
        for name in sorted(os.listdir(os.path.join(ROOT, pkg))):
            if name.endswith(".py") or name == "py.typed":
                yield pkg + "/" + name, os.path.join(ROOT, pkg, name)
    for mod in MODULES:
        yield mod + ".py", os.path.join(ROOT, mod + ".py")


def _date():
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        import time
        return max(time.gmtime(int(epoch))[:6], _EPOCH)
    return _EPOCH


def _write_wheel(directory, files):
    """Write a wheel of files ((arcname, bytes) pairs) into directory."""
    p, meta = _metadata()
    name, version = p["name"].replace("-", "_"), p["version"]
    info = "%s-%s.dist-info" % (name, version)
    wheel = "Wheel-Version: 1.0\nGenerator: nsbox_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG
    files = list(files) + [(info + "/METADATA", meta), (info + "/WHEEL", wheel.encode())]
    record = []
    for arc, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
    record.append(info + "/RECORD,,")
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    os.makedirs(directory, exist_ok=True)
    basename = "%s-%s-%s.whl" % (name, version, TAG)
    tmp = os.path.join(directory, "." + basename + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            zi = zipfile.ZipInfo(arc, _date())
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, os.path.join(directory, basename))
    return basename


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# --- PEP 517 hooks ---

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p, meta = _metadata()
    info = "%s-%s.dist-info" % (p["name"].replace("-", "_"), p["version"])
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "wb") as f:
        f.write(meta)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(arc, _read(path)) for arc, path in _sources()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel whose one file is a .pth naming the source tree."""
    return _write_wheel(wheel_directory, [("_nsbox_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p, meta = _metadata()
    base = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    files = [("pyproject.toml", "pyproject.toml"), ("PKG-INFO", None), ("_build/nsbox_build.py", "_build/nsbox_build.py")]
    if "readme" in p:
        files.append((p["readme"], p["readme"]))
    files += [(arc, os.path.relpath(path, ROOT)) for arc, path in _sources()]
    os.makedirs(sdist_directory, exist_ok=True)
    basename = base + ".tar.gz"
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    with tarfile.open(os.path.join(sdist_directory, basename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arc, rel in files:
            data = meta if rel is None else _read(os.path.join(ROOT, rel))
            ti = tarfile.TarInfo(base + "/" + arc)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, mtime
            t.addfile(ti, io.BytesIO(data))
    return basename


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: nsbox_build.py DIR   (writes the nsbox wheel into DIR)")
    print(os.path.join(sys.argv[1], build_wheel(sys.argv[1])))
