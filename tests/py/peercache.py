"""Peers' reference outputs, computed once per machine and cached by the hash of their inputs and
the peer's version.

A peer run (an MRtrix command, a COMMIT, AMICO or dmipy fit) is a pure function of its inputs:
the files it reads (by content, not by path), its arguments, the code that drives it and the
versions of the peer and of what it runs on.  The hash of all of these names a cache entry, a
folder under $DIMOC_PEER_CACHE (tests/run.sh sets it; the user's cache folder by default) that
holds the run's output files and a manifest of their SHA-256 sums.  An entry is written under a
temporary name and renamed into place, so tests running side by side never see half of one; an
entry whose files do not match their manifest is deleted and computed again, never trusted.
DIMOC_PEER_CACHE=off computes every reference afresh.
"""
import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.environ.get("DIMOC_PEER_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dimoc-test-peers")
MANIFEST = "manifest.json"
FORMAT = 1  # bumped when the layout of an entry changes


def _sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_hash(path):
    """SHA-256 of a file, or of a folder's files (names and contents, in name order)."""
    if os.path.isdir(path):
        h = hashlib.sha256()
        for base, dirs, files in sorted(os.walk(path)):
            dirs.sort()
            for name in sorted(files):
                p = os.path.join(base, name)
                h.update(os.path.relpath(p, path).encode() + b"\0" + _sha_file(p).encode())
        return h.hexdigest()
    return _sha_file(path)


@functools.lru_cache(maxsize=None)
def mrtrix_version():
    """MRtrix's version as its commands print it (e.g. '3.0.3')."""
    p = subprocess.run(["mrinfo", "-version"], capture_output=True, text=True)
    first = (p.stdout or p.stderr).splitlines()
    return first[0].strip() if first else "unknown"


def python_versions(*packages):
    """{package: version} of installed Python distributions (numpy and scipy always)."""
    out = {}
    for name in ("numpy", "scipy") + packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def key_of(peer, versions, spec, inputs=(), code=()):
    """The entry's name: the peer, its versions, a JSON-able spec of the call, and the contents
    of the input files and of the code that drives the peer."""
    h = hashlib.sha256()
    h.update(json.dumps({"format": FORMAT, "peer": peer, "versions": versions, "spec": spec},
                        sort_keys=True, default=str).encode())
    for p in list(inputs) + list(code):
        h.update(b"\0" + content_hash(p).encode())
    return h.hexdigest()[:40]


def _valid(entry):
    """True when every file of the entry matches its manifest."""
    try:
        manifest = json.load(open(os.path.join(entry, MANIFEST)))
        for rel, sha in manifest["files"].items():
            if _sha_file(os.path.join(entry, rel)) != sha:
                return False
        return True
    except (OSError, ValueError, KeyError):
        return False


def _seal(folder, meta):
    files = {}
    for base, _, names in os.walk(folder):
        for name in names:
            p = os.path.join(base, name)
            if os.path.islink(p):
                os.unlink(p)
                continue
            files[os.path.relpath(p, folder)] = _sha_file(p)
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump({"files": files, "meta": meta}, f, indent=1, sort_keys=True)


def cached_folder(peer, versions, spec, compute, inputs=(), code=()):
    """The folder of a cached peer run, computed first if absent or corrupt: compute(folder)
    writes the run's outputs into an empty folder and returns a JSON-able value (kept in the
    manifest as 'meta', e.g. an exit status and messages).  Returns (folder, meta); the folder
    must be read, never written."""
    key = key_of(peer, versions, spec, inputs, code)
    if os.environ.get("DIMOC_PEER_CACHE") == "off":
        tmp = tempfile.mkdtemp(prefix=f"{peer}-", dir=os.environ.get("TMPROOT"))
        return tmp, compute(tmp)
    entry = os.path.join(ROOT, peer, key)
    if os.path.isdir(entry):
        if _valid(entry):
            return entry, json.load(open(os.path.join(entry, MANIFEST)))["meta"]
        shutil.rmtree(entry, ignore_errors=True)
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{key}-", dir=os.path.dirname(entry))
    try:
        meta = compute(tmp)
        _seal(tmp, meta)
        try:
            os.rename(tmp, entry)
        except OSError:  # another test made the same entry meanwhile: use that one
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return entry, json.load(open(os.path.join(entry, MANIFEST)))["meta"]


def copy_files(src, dest):
    """Copies a folder's files (not an entry's manifest, not links) into dest."""
    os.makedirs(dest, exist_ok=True)
    for base, _, names in os.walk(src):
        for name in names:
            p = os.path.join(base, name)
            rel = os.path.relpath(p, src)
            if rel == MANIFEST or os.path.islink(p):
                continue
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            if os.path.realpath(p) != os.path.realpath(os.path.join(dest, rel)):
                shutil.copyfile(p, os.path.join(dest, rel))


def _is_pathlike(arg, cwd):
    return "/" in arg or os.path.exists(os.path.join(cwd, arg))


def run_command(args, env=None, cwd=None, version=None, peer="mrtrix"):
    """Runs a peer's command line (MRtrix by default) through the cache; returns
    (exit status, stdout, stderr) as subprocess.run would give them.  Arguments that name
    existing files are inputs (by content); arguments that name a file not yet there, in an
    existing folder, are outputs (by position and extension), restored to their paths from the
    cache.  Only successful runs are cached."""
    cwd = cwd or os.getcwd()
    args = [str(a) for a in args]
    spec, inputs, outputs, out_at = [], [], [], []
    for i, a in enumerate(args):
        p = os.path.join(cwd, a)
        if os.path.isfile(p) or (os.path.isdir(p) and _is_pathlike(a, cwd)):
            spec.append(["in", os.path.splitext(a)[1]])
            inputs.append(p)
        elif "/" in a and os.path.isdir(os.path.dirname(p) or cwd) and not a.startswith("-"):
            spec.append(["out", len(outputs), os.path.basename(a)[-12:]])
            outputs.append(p)
            out_at.append(i)
        else:
            spec.append(a)
    if not outputs or os.environ.get("DIMOC_PEER_CACHE") == "off":
        r = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd)
        return r.returncode, r.stdout, r.stderr
    versions = {"peer": version or (mrtrix_version() if peer == "mrtrix" else None)}
    envkeys = {k: v for k, v in (env or {}).items() if k.startswith("MRTRIX") or k == "OMP_NUM_THREADS"}

    def compute(folder):
        run_args = list(args)
        for i, (p, at) in enumerate(zip(outputs, out_at)):
            run_args[at] = os.path.join(folder, f"out{i}_{os.path.basename(p)}")
        r = subprocess.run(run_args, capture_output=True, text=True, env=env, cwd=cwd)
        if r.returncode != 0:
            raise _Failed(r)
        return {"stdout": r.stdout.replace(folder, "@OUT@"), "stderr": r.stderr.replace(folder, "@OUT@")}

    try:
        entry, meta = cached_folder(peer, versions, {"args": spec, "env": envkeys}, compute, inputs)
    except _Failed as e:
        return e.result.returncode, e.result.stdout, e.result.stderr
    for i, p in enumerate(outputs):
        src = os.path.join(entry, f"out{i}_{os.path.basename(p)}")
        if os.path.isdir(src):
            shutil.rmtree(p, ignore_errors=True)
            shutil.copytree(src, p)
        elif os.path.exists(src):
            shutil.copyfile(src, p)
    return 0, meta["stdout"], meta["stderr"]


class _Failed(Exception):
    def __init__(self, result):
        super().__init__(result.stderr)
        self.result = result


def is_mrtrix(command):
    """True for a command of MRtrix's (its programs live in an mrtrix3 folder)."""
    path = shutil.which(str(command))
    return bool(path) and "mrtrix3" in os.path.realpath(path)


def run(args, env=None, cwd=None):
    """subprocess.run's (exit status, stdout, stderr) of a command line, through the cache when
    the command is MRtrix's."""
    args = [str(a) for a in args]
    if is_mrtrix(args[0]):
        return run_command(args, env=env, cwd=cwd)
    r = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def cached_array(peer, versions, spec, compute, inputs=(), code=()):
    """A peer's result that is one numpy array (compute() returns it), through the cache."""
    import numpy as np

    def run(folder):
        np.save(os.path.join(folder, "result.npy"), np.asarray(compute()))

    entry, _ = cached_folder(peer, versions, spec, run, inputs, code)
    return np.load(os.path.join(entry, "result.npy"))
