"""The build backend of the Python package (PEP 517; pyproject.toml names it): `pip install .`
and `python -m build` run `make lib` in the source tree and pack the package with the library
and the shipped data it reads.

Why a backend of its own rather than setuptools: the package is a C library built by make plus
pure-Python ctypes code, so setuptools' work (compiling extensions) is not needed, while it
would need customising at every step (running make, a platform tag without a CPython
extension, data files, a build/ folder of its own beside the Makefile's).  This one uses only
the standard library: it builds offline, and needs nothing installed first.

The wheel holds:
    dimoc/*.py                         the package
    dimoc/lib/libdimoc.so.MAJOR        the C library (include/dimoc.h)
    dimoc/share/dimoc/models, templates, data
                                       the shipped data, found by the library beside itself
                                       (LIBDIR/../share/dimoc), as in an installed PREFIX
Its tag is py3-none-PLATFORM: any Python 3 (ctypes), this machine's platform."""
import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "dimoc"
SUMMARY = "dimoc's diffusion-MRI model compiler from Python (fitting and tracking to follow)"
# What an sdist carries: everything `make lib` and the package need.
SDIST_PATHS = ["Makefile", "VERSION", "README.md", "pyproject.toml", "include", "compiler",
               "runtime", "templates", "models", "data", "python", "docs/api.md"]
# A fixed date for the archives' members: the same sources give the same wheel.
DATE = (1980, 1, 1, 0, 0, 0)


def _version():
    with open(os.path.join(ROOT, "VERSION")) as f:
        return f.read().strip()


def _soname():
    with open(os.path.join(ROOT, "include", "dimoc.h")) as f:
        major = re.search(r"^#define DIMOC_API_VERSION_MAJOR (\d+)", f.read(), re.M).group(1)
    return f"libdimoc.so.{major}"


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {SUMMARY}\n"
            "Requires-Python: >=3.8\nLicense: see the source distribution\n"
            "Provides-Extra: fit\nRequires-Dist: numpy; extra == \"fit\"\n"
            "Description-Content-Type: text/markdown\n\n"
            "The Python package of dimoc: models checked and described by dimoc's compiler "
            "(dimoc.Model, dimoc.models()) and fitted on numpy arrays (dimoc.fit), through its "
            "C library.  See docs/api.md.\n")


def _tag():
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{platform}"


def _make_library():
    """`make lib` in the source tree (its objects reused), output to stderr (pip shows it on
    failure); the built library's path."""
    jobs = os.environ.get("DIMOC_MAKE_JOBS", str(os.cpu_count() or 1))
    subprocess.run(["make", "-C", ROOT, f"-j{jobs}", "lib"], check=True, stdout=sys.stderr)
    return os.path.realpath(os.path.join(ROOT, "build", _soname()))


def _walk(top, keep):
    """The files under ROOT/top that keep(path) accepts, sorted, as paths relative to ROOT."""
    out = []
    for d, subdirs, names in os.walk(os.path.join(ROOT, top)):
        subdirs[:] = sorted(s for s in subdirs if s != "__pycache__" and not s.endswith(".egg-info"))
        for n in sorted(names):
            rel = os.path.relpath(os.path.join(d, n), ROOT)
            if keep(rel):
                out.append(rel)
    return out


def _package_files():
    """(name in the wheel, path on disk) of everything but the library."""
    files = [(os.path.relpath(p, "python"), p)
             for p in _walk("python/dimoc", lambda p: p.endswith(".py"))]
    share = "dimoc/share/dimoc/"
    files += [(share + p, p) for p in _walk("models", lambda p: p.endswith(".model"))]
    # the templates as `make install` copies them: every engine's folder, its .h, .c and .cu
    files += [(share + p, p) for p in _walk("templates", lambda p: p.endswith((".h", ".c", ".cu")))]
    files += [(share + p, p) for p in _walk("data", lambda p: p.endswith(".txt"))]
    return files


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _add(zf, records, name, data, mode=0o644):
    info = zipfile.ZipInfo(name, DATE)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)
    records.append(_record_line(name, data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = f"{NAME}-{_version()}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    library = _make_library()
    version, tag = _version(), _tag()
    dist_info = f"{NAME}-{version}.dist-info"
    wheel_name = f"{NAME}-{version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, wheel_name)
    records = []
    with zipfile.ZipFile(path + ".tmp", "w") as zf:
        for name, src in _package_files():
            with open(os.path.join(ROOT, src), "rb") as f:
                _add(zf, records, name, f.read())
        with open(library, "rb") as f:
            _add(zf, records, f"dimoc/lib/{_soname()}", f.read(), 0o755)
        _add(zf, records, f"{dist_info}/METADATA", _metadata().encode())
        wheel = (f"Wheel-Version: 1.0\nGenerator: dimoc_build_backend\n"
                 f"Root-Is-Purelib: false\nTag: {tag}\n")
        _add(zf, records, f"{dist_info}/WHEEL", wheel.encode())
        records.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", DATE)
        info.external_attr = 0o100644 << 16
        zf.writestr(info, "\n".join(records) + "\n")
    os.replace(path + ".tmp", path)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = f"{NAME}-{version}"
    skip = re.compile(r"(^|/)(__pycache__|[^/]*\.egg-info)(/|$)|\.(o|d|a|so|pyc)$")
    files = []
    for p in SDIST_PATHS:
        if os.path.isdir(os.path.join(ROOT, p)):
            files += [f for f in _walk(p, lambda f: not skip.search(f))]
        elif os.path.exists(os.path.join(ROOT, p)):
            files.append(p)
    name = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    path = os.path.join(sdist_directory, name)
    with tarfile.open(path + ".tmp", "w:gz", format=tarfile.PAX_FORMAT) as tf:
        def add(arcname, data, mode=0o644):
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size, info.mode, info.mtime = len(data), mode, 315532800
            tf.addfile(info, io.BytesIO(data))
        add("PKG-INFO", _metadata().encode())
        for f in files:
            full = os.path.join(ROOT, f)
            with open(full, "rb") as fh:
                add(f, fh.read(), 0o755 if os.access(full, os.X_OK) else 0o644)
    os.replace(path + ".tmp", path)
    return name
