"""Helpers for dimoc's Python tests: run the program, make inputs, read outputs, report."""
import json
import os
import struct
import subprocess
import sys
import zlib

import nibabel as nib
import numpy as np

DIMOC = os.environ.get("DIMOC", os.path.join(os.path.dirname(__file__), "..", "..", "bin", "dimoc"))
TMPROOT = os.environ.get("TMPROOT", "/tmp/dimoc-tests")
failures = 0


def workdir(name):
    d = os.path.join(TMPROOT, name)
    subprocess.run(["rm", "-rf", d], check=True)
    os.makedirs(d)
    return d


def check(name, ok, detail=""):
    """Prints PASS/FAIL for one assertion group."""
    global failures
    if ok:
        print(f"PASS {name}" + (f" ({detail})" if detail else ""))
    else:
        failures += 1
        print(f"FAIL {name}: {detail}")
    sys.stdout.flush()


def dimoc(*args, expect_ok=True):
    """Runs dimoc; returns (exit status, stdout, stderr)."""
    args = [str(a) for a in args]
    if args and args[0] == "fit" and os.environ.get("DIMOC_FIT_DEVICE"):
        args += ["--device", os.environ["DIMOC_FIT_DEVICE"]]
    p = subprocess.run([DIMOC] + args, capture_output=True, text=True)
    if expect_ok and p.returncode != 0:
        raise RuntimeError(f"dimoc {' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return p.returncode, p.stdout, p.stderr


def dimoc_in_cache(cache, *args):
    """Runs dimoc with its compile cache in `cache` (XDG_CACHE_HOME); the CompletedProcess."""
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    return subprocess.run([DIMOC, *map(str, args)], capture_output=True, text=True, env=env)


def cached_files(cache, suffix):
    """The files of dimoc's compile cache in `cache` ending in suffix (.so: host fitters, .cubin:
    GPU programs), sorted."""
    d = os.path.join(cache, "dimoc")
    return sorted(f for f in os.listdir(d) if f.endswith(suffix)) if os.path.isdir(d) else []


def check_refused(name, result, words, out):
    """check() that a dimoc run (result: dimoc(..., expect_ok=False)) failed with one error line
    holding `words` and left no `out`."""
    rc, _, err = result
    lines = [x for x in err.strip().splitlines() if x]
    check(name, rc != 0 and len(lines) == 1 and words in err and not os.path.exists(out),
          f"rc {rc}: {err.strip()}")


def save(path, data, affine=None):
    nib.save(nib.Nifti1Image(np.asarray(data, dtype=np.float32), np.eye(4) if affine is None else affine), path)
    return path


def load(path):
    return np.asarray(nib.load(path).dataobj, dtype=np.float64)


def scheme(d, shells):
    bvals, bvecs = os.path.join(d, "bvals"), os.path.join(d, "bvecs")
    dimoc("scheme", "--shells", shells, "--bvals", bvals, "--bvecs", bvecs)
    return bvals, bvecs


def random_directions(rng, n):
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1)[:, None]
    v[v[:, 2] < 0] *= -1
    th = np.arccos(v[:, 2])
    ph = np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)
    return v, th, ph


def angle_deg(a, b):
    c = np.abs(np.sum(a * b, axis=-1)) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    return np.degrees(np.arccos(np.clip(c, 0, 1)))


def read_png(path):
    """Decodes an 8-bit grey or RGB PNG into an array (height, width[, 3])."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind}"
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, ctype = header[:4]
    assert depth == 8 and ctype in (0, 2), f"depth {depth} colour type {ctype}"
    ch = 1 if ctype == 0 else 3
    raw = zlib.decompress(idat)
    stride = width * ch
    out = np.zeros((height, stride), dtype=np.int64)
    prev = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)], dtype=np.uint8).astype(np.int64)
        cur = np.zeros(stride, dtype=np.int64)
        for x in range(stride):
            a = cur[x - ch] if x >= ch else 0
            b = prev[x]
            c = prev[x - ch] if x >= ch else 0
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[x] = (line[x] + pred) & 0xFF
        out[y] = cur
        prev = cur
    return out.reshape(height, width, ch) if ch == 3 else out, ctype



def one_and_two_fibres(d, n, shells, seed=7):
    """ball_2_sticks data of n one-fibre voxels (f1 = 0.6) beside n crossings at 90 degrees
    (f1 = f2 = 0.3) in a 2 x n x 1 image, Rician noise at SNR 30; returns (data, bvals, bvecs)
    with the truth maps saved as d/true_NAME.nii.gz."""
    rng = np.random.default_rng(seed)
    maps = {k: np.zeros((2, n, 1)) for k in ["S0", "d", "f1", "th1", "ph1", "f2", "th2", "ph2"]}
    for r in range(2):
        for y in range(n):
            u = rng.normal(size=3)
            u /= np.linalg.norm(u)
            w = np.cross(u, rng.normal(size=3))
            w /= np.linalg.norm(w)
            f1, f2 = (0.6, 0.0) if r == 0 else (0.3, 0.3)
            vals = {"S0": 1000, "d": 1.5e-3, "f1": f1, "f2": f2}
            for i, v in ((1, u), (2, w)):
                v = v if v[2] >= 0 else -v
                vals[f"th{i}"] = np.arccos(min(1.0, v[2]))
                vals[f"ph{i}"] = np.mod(np.arctan2(v[1], v[0]), 2 * np.pi)
            for k, x in vals.items():
                maps[k][r, y, 0] = x
    bvals, bvecs = scheme(d, shells)
    params = ",".join(f"{k}={save(os.path.join(d, 'true_' + k + '.nii.gz'), m)}"
                      for k, m in maps.items())
    data = os.path.join(d, "dwi.nii.gz")
    dimoc("simulate", "ball_2_sticks", "--bvals", bvals, "--bvecs", bvecs, "--params", params,
          "--noise", "rician", "--snr", 30, "--seed", 11, "--out", data)
    return data, bvals, bvecs

# The source tree's Python package (python/, over build/'s library).
PYTHON_SOURCE = os.path.join(os.environ.get("ROOT", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), "python")


def source_dimoc():
    """The Python package of the source tree, imported."""
    sys.path.insert(0, PYTHON_SOURCE)
    import dimoc as package
    return package


# An oblique voxel -> world matrix: the Python API tests' grids.
OBLIQUE = np.array([[1.8, 0.1, 0, -40], [0, 2.0, 0.2, -60], [0.05, 0, 2.5, 12], [0, 0, 0, 1]])


def ball_stick_truth(rng, grid, affine=OBLIQUE):
    """Ball & 1 stick parameters drawn on `grid` (S0, d, f1, th1, ph1 in that order of draws),
    each written as true_<name>.nii.gz in the working folder."""
    truth = {"S0": rng.uniform(800, 1200, grid), "d": rng.uniform(1.0e-3, 2.0e-3, grid),
             "f1": rng.uniform(0.3, 0.7, grid), "th1": rng.uniform(0.3, 2.8, grid),
             "ph1": rng.uniform(0.1, 6.1, grid)}
    for k, v in truth.items():
        save(f"true_{k}.nii.gz", v, affine)
    return truth


def ball_stick_dwi(shells, rng, grid, snr, noise_seed, affine=OBLIQUE):
    """A ball & stick DWI in the working folder: the scheme (bvals, bvecs), the truth
    (ball_stick_truth, drawn from rng) and `dimoc simulate`'s Rician signal (sim.nii.gz).
    (b, g, truth)."""
    dimoc("scheme", "--shells", shells, "--bvals", "bvals", "--bvecs", "bvecs")
    truth = ball_stick_truth(rng, grid, affine)
    dimoc("simulate", "ball_1_stick", "--bvals", "bvals", "--bvecs", "bvecs", "--params",
          ",".join(f"{k}=true_{k}.nii.gz" for k in truth), "--noise", "rician", "--snr", snr,
          "--seed", noise_seed, "--out", "sim.nii.gz")
    return np.loadtxt("bvals"), np.loadtxt("bvecs"), truth


def check_refused_call(label, word, calls, fn, *args, **kw):
    """check() that fn(*args, **kw) raises a ValueError (a TypeError too, as the package's
    argument errors are) whose message holds `word`, before any work: `calls`, the list its
    progress callback appends to, stays empty."""
    calls.clear()
    try:
        fn(*args, **kw)
        check(label, False, "accepted")
    except ValueError as e:
        check(label, word in str(e) and isinstance(e, TypeError) and not calls,
              f"{e} (progress calls: {len(calls)})")
    except Exception as e:
        check(label, False, f"{type(e).__name__}: {e}")


# The Ctrl-C check's script: the package imported from the source tree, SIGINT 0.3 s after the
# first progress report (of STAGE), then the check of the next call.
CTRL_C_SCRIPT = r"""
import os, signal, sys, threading, time, json
sys.path.insert(0, sys.argv[1])
import numpy as np, nibabel as nib, dimoc
b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
STAGE = {stage!r}
{setup}
started = []
def interrupt_soon(stage, fraction):
    if (STAGE is None or stage == STAGE) and not started:
        started.append(time.time())
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
out = {{}}
try:
    {call}
    out["raised"] = None
except KeyboardInterrupt:
    out["raised"] = "KeyboardInterrupt"
out["late"] = time.time() - started[0] - 0.3 if started else 9
{after}
out["after"] = bool(after_ok)
print(json.dumps(out))
"""


def check_ctrl_c(label, setup, call, after, stage=None, timeout=600):
    """check() that Ctrl-C during a call of the Python package reaches the caller: a fresh
    Python (the working folder's bvals and bvecs loaded as b, g) runs `setup`, then `call` (code
    that passes progress=interrupt_soon), is sent SIGINT 0.3 s after the call's first progress
    report (of `stage`, when given), and must raise KeyboardInterrupt within a second; then
    `after` (code that sets after_ok, e.g. the next call equals the command's) must hold."""
    script = CTRL_C_SCRIPT.format(stage=stage, setup=setup, call=call, after=after)
    p = subprocess.run([sys.executable, "-c", script, PYTHON_SOURCE], capture_output=True,
                       text=True, timeout=timeout)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = {}
    check(label, out.get("raised") == "KeyboardInterrupt" and out.get("late", 9) < 1.0 and
          out.get("after") is True, f"{out} {p.stderr[-500:]}")


def finish():
    sys.exit(1 if failures else 0)
