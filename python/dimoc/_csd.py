"""dimoc.response, dimoc.csd and dimoc.peaks: response functions, constrained spherical
deconvolution and FOD peaks on numpy arrays, through the C library's dimoc_response, dimoc_csd
and dimoc_peaks (include/dimoc.h), the engines of `dimoc response`, `dimoc csd` and `dimoc
peaks`: the same inputs and options give the same responses, FODs and peaks, bit for bit.

Everything is checked here first (ValueError naming the argument, before any work); the C call
runs on a thread of its own, so that Ctrl-C raises KeyboardInterrupt at once."""
import os
import re
from collections.abc import Mapping

import numpy as np

from . import _native
from ._call import Result, arg_error, check_affine
from ._dti import DWI_OPTIONS, call, dwi_input, out_type, unknown_options
from ._fit import _all_finite, _c_array, _Inputs, _load, _mask, _numeric, choice, integer
from ._native import lib as _lib

_C = _native.ctypes
_DP = _C.POINTER(_C.c_double)
ALGORITHMS = ("tournier", "dhollander", "fa")
TISSUES = ("wm", "gm", "csf")


class Responses(Result):
    """The responses of dimoc.response (or the ones a dimoc.csd used), by the names of the
    command's files: "T_response" (one row per shell of zonal coefficients l = 0, 2, ..),
    "T_response_shells" (the rows' b-values) and "T_voxels" (the voxels each came from), T
    "wm" and, with dhollander, "gm" and "csf".  .tissues; .to_files(folder) writes the
    T_response.txt files the command writes (and the voxels with to_nifti); dimoc.csd takes the
    result as its response."""

    @property
    def tissues(self):
        return [t for t in TISSUES if f"{t}_response" in self]

    def to_files(self, folder):
        """FOLDER/T_response.txt for each tissue, in MRtrix's format, as `dimoc response`
        writes them (15 significant digits); returns the folder."""
        os.makedirs(folder, exist_ok=True)
        for t in self.tissues:
            write_response(os.path.join(folder, f"{t}_response.txt"), self[f"{t}_response"],
                           self[f"{t}_response_shells"])
        return folder


def write_response(path, rows, shells=None):
    """An MRtrix response file: a "# Shells:" comment (when the b-values are known), then one
    row of coefficients per shell, "%.15g" as dimoc writes them."""
    with open(path, "w") as f:
        if shells is not None and np.isfinite(shells).all():
            f.write("# Shells: " + ",".join("%.6g" % b for b in shells) + "\n")
        for row in np.atleast_2d(rows):
            f.write(" ".join("%.15g" % v for v in row) + "\n")


def read_response(path, what="response"):
    """(rows, shells or None) of an MRtrix response file, as dimoc reads one."""
    rows, shells = [], None
    with open(os.fspath(path)) as f:
        for line in f:
            s = line.strip()
            if s.startswith("#"):
                m = re.match(r"#\s*Shells\s*:\s*(.*)", s)
                if m:
                    shells = [float(x) for x in re.split(r"[,\s]+", m.group(1).strip()) if x]
                continue
            if s:
                try:
                    rows.append([float(x) for x in re.split(r"[,\s]+", s) if x])
                except ValueError:
                    raise arg_error(f"{what}: {path}: not numbers: {s[:40]!r}") from None
    if not rows or len({len(r) for r in rows}) != 1:
        raise arg_error(f"{what}: {path}: no rows, or rows of different lengths")
    if shells is not None and len(shells) != len(rows):
        raise arg_error(f"{what}: {path}: its Shells comment names {len(shells)} b-values for "
                        f"{len(rows)} rows")
    return np.array(rows, dtype=np.float64), shells


def _one_response(value, what):
    """(rows, shells or None) of a response given as a file, an array, or (array, shells)."""
    if isinstance(value, (str, os.PathLike)):
        rows, shells = read_response(value, what)
    elif isinstance(value, tuple) and len(value) == 2:
        rows, shells = _numeric(value[0], what), value[1]
    else:
        rows, shells = _numeric(value, what), None
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    if rows.ndim != 2 or not 1 <= rows.shape[0] <= 16 or not 1 <= rows.shape[1] <= 11:
        raise arg_error(f"{what}: shape {rows.shape}; one row per shell (1 to 16) of 1 to 11 "
                        f"zonal coefficients")
    if not np.isfinite(rows).all():
        raise arg_error(f"{what}: not finite")
    if shells is not None:
        shells = np.asarray(shells, dtype=np.float64).ravel()
        if shells.size != rows.shape[0] or not np.isfinite(shells).all() or (shells < 0).any():
            raise arg_error(f"{what}: {shells.size} shell b-values for {rows.shape[0]} rows, or "
                            f"not numbers >= 0")
    return rows, shells


def _responses(response, keep):
    """The dimoc_tissue_response records of `response`: a Responses (or any result with
    T_response arrays), a mapping tissue -> response, or a sequence WM[, GM], CSF; each a file,
    an array or (array, shells)."""
    if isinstance(response, Mapping):
        if any(f"{t}_response" in response for t in TISSUES):
            given = [(f"response {t}", (response[f"{t}_response"],
                                        response.get(f"{t}_response_shells")))
                     for t in TISSUES if f"{t}_response" in response]
        else:
            unknown = [k for k in response if k not in TISSUES]
            if unknown or "wm" not in response:
                raise arg_error(f"response: expected the tissues wm[, gm], csf, got "
                                f"{list(response)}")
            given = [(f"response {t}", response[t]) for t in TISSUES if t in response]
    elif isinstance(response, (str, os.PathLike)):
        given = [("response", response)]
    else:
        try:
            given = [(f"response[{i}]", r) for i, r in enumerate(response)]
        except TypeError:
            raise arg_error("response: expected a dimoc.response result, a mapping of tissues "
                            "to responses, or files or arrays WM[, GM], CSF") from None
    if not 1 <= len(given) <= 3:
        raise arg_error(f"response: {len(given)} responses; 1 to 3 (WM[, GM], CSF)")
    records = (_native.TissueResponse * len(given))()
    for i, (what, value) in enumerate(given):
        rows, shells = _one_response(value, what)
        rows = keep.hold(np.ascontiguousarray(rows))
        records[i].shells, records[i].coefficients = rows.shape
        records[i].values = rows.ctypes.data_as(_DP)
        if shells is not None:
            records[i].bvals = keep.hold(np.ascontiguousarray(shells)).ctypes.data_as(_DP)
    return keep.hold(records), len(given)


def _directions(value, keep):
    """(count, pointer) of constraint directions: [azimuth, elevation] rows in radians, an
    array or a file (dwi2fod's -directions)."""
    if isinstance(value, (str, os.PathLike)):
        value = np.loadtxt(os.fspath(value), ndmin=2, comments="#", delimiter=None)
    d = _numeric(value, "directions").astype(np.float64)
    if d.ndim != 2 or d.shape[1] != 2 or d.shape[0] < 6 or not np.isfinite(d).all():
        raise arg_error(f"directions: shape {d.shape}; [azimuth, elevation] pairs in radians, 6 "
                        f"rows at least, finite")
    d = keep.hold(np.ascontiguousarray(d))
    return d.shape[0], d.ctypes.data_as(_DP)


def _threads(options):
    t = options.get("threads")
    return 0 if t is None else integer("threads", t, 1, 4096)


def response(data, bvals=None, bvecs=None, mask=None, gtab=None, algorithm="tournier",
             **options):
    """Estimates response functions as `dimoc response` does (MRtrix's dwi2response): returns
    a dimoc Responses (a mapping: "wm_response", "wm_response_shells", "wm_voxels", and gm and
    csf with dhollander), which dimoc.csd takes as its response.

    data, bvals, bvecs, mask, gtab (and grad, affine): as for dimoc.dti.  algorithm:
    "tournier", "dhollander" or "fa".  Keywords: lmax (of the WM response, even; 10), threads,
    progress, cancel, quiet."""
    unknown_options(options, ("lmax", "threads") + DWI_OPTIONS, "response")
    keep = _Inputs()
    inp, _, affine, header = dwi_input(data, bvals, bvecs, mask, gtab, options, keep)
    opts = _native.ResponseOptions()
    opts.size = _C.sizeof(opts)
    opts.algorithm = choice("algorithm", algorithm, ALGORITHMS).encode()
    opts.lmax = integer("lmax", options.get("lmax", 10), 0, 20)
    if opts.lmax % 2:
        raise arg_error(f"lmax: {opts.lmax}; the degree must be even")
    opts.threads = _threads(options)
    arrays, kinds, provenance, lines = call("dimoc.response", _lib.dimoc_response, inp, opts,
                                            options, keep)
    return Responses(arrays, kinds, provenance, lines, affine, header, "dimoc.response")


CSD_OPTIONS = ("lmax", "directions", "algorithm", "msmt", "normalise", "device", "gpus",
               "precision", "threads", "max_iter", "part", "out_type") + DWI_OPTIONS


def csd(data, bvals=None, bvecs=None, mask=None, gtab=None, response=None, **options):
    """Constrained spherical deconvolution as `dimoc csd` does (MRtrix's dwi2fod csd, or
    msmt_csd with several tissues): returns a dimoc Responses holding the command's maps by
    their file names, "wm_fod" (X, Y, Z, K SH coefficients, MRtrix's basis and world frame),
    "gm" and "csf" as there are tissues, "status", the responses used and the voxels of
    estimated ones.

    data, bvals, bvecs, mask, gtab (and grad, affine): as for dimoc.dti; the affine (the image's,
    the identity for a bare array) turns the directions into world space, as the command does.
    response: None (estimated: tournier for one shell, dhollander for several, or as
    `algorithm` and `msmt` say), a dimoc.response result, a mapping {"wm": .., "gm": ..,
    "csf": ..}, or a sequence WM[, GM], CSF; each response a file (MRtrix's format), an array
    (one row per shell) or (array, shells' b-values).

    Keywords, as the command's options: lmax, directions ([azimuth, elevation] rows or a
    file), algorithm, msmt, normalise, device ("auto", "cpu", "gpu"), gpus, precision
    ("float", "double"), threads, max_iter, part ("K/N"), out_type ("float32", the command's;
    "float64"); progress, cancel, quiet."""
    unknown_options(options, CSD_OPTIONS, "csd")
    keep = _Inputs()
    opts = _native.CsdOptions()
    opts.size = _C.sizeof(opts)
    if response is not None:
        if options.get("algorithm") is not None:
            raise arg_error("algorithm: estimates responses; it cannot go with response")
        opts.responses, opts.nresponses = _responses(response, keep)
    if options.get("algorithm") is not None:
        opts.algorithm = choice("algorithm", options["algorithm"], ALGORITHMS).encode()
    opts.msmt = int(bool(options.get("msmt", False)))
    lmax = options.get("lmax")
    opts.lmax = -1 if lmax is None else integer("lmax", lmax, 0, 20)
    if opts.lmax > 0 and opts.lmax % 2:
        raise arg_error(f"lmax: {opts.lmax}; the degree must be even")
    if options.get("directions") is not None:
        opts.ndirections, opts.directions = _directions(options["directions"], keep)
    opts.normalise = int(bool(options.get("normalise", False)))
    opts.device = choice("device", options.get("device", "auto"), ("auto", "cpu", "gpu")).encode()
    gpus = options.get("gpus", "0")
    opts.gpus = keep.hold(str(gpus).encode())
    opts.precision = choice("precision", options.get("precision", "double"),
                            ("float", "double")).encode()
    opts.threads = _threads(options)
    mi = options.get("max_iter")
    opts.max_iter = 0 if mi is None else integer("max_iter", mi, 1, 100000)
    part = options.get("part")
    if part is not None:
        if not isinstance(part, str):
            part = "/".join(str(int(v)) for v in part)
        if not re.fullmatch(r"\d+/\d+", part) or not 1 <= int(part.split("/")[0]) <= \
                int(part.split("/")[1]):
            raise arg_error(f"part: {part!r} is not K/N with 1 <= K <= N")
        if opts.normalise:
            raise arg_error("part: normalise scales every voxel by a field fitted to the whole "
                            "mask's FODs; it cannot go with part")
        opts.part = keep.hold(part.encode())
    opts.out_type = out_type(options.get("out_type", "float32"))
    inp, _, affine, header = dwi_input(data, bvals, bvecs, mask, gtab, options, keep)
    arrays, kinds, provenance, lines = call("dimoc.csd", _lib.dimoc_csd, inp, opts, options,
                                            keep)
    return Responses(arrays, kinds, provenance, lines, affine, header, "dimoc.csd")


def peaks(fod, mask=None, affine=None, **options):
    """The peaks of every voxel's FOD, as `dimoc peaks` finds them: returns a dimoc.Result of
    "peaks" (X, Y, Z, 3 num: MRtrix's sh2peaks layout, NaN where none), "dyadsK" (unit vectors
    in FSL's bvecs frame) and "peak_ampK", K = 1 .. num.

    fod: (X, Y, Z, K) SH coefficients (an array, a nibabel image, a path, or a dimoc.csd result:
    its wm_fod and affine).  mask (X, Y, Z): search where non-zero.  affine: the FOD's voxel ->
    world matrix, for the dyads' frame (the image's, the csd result's; else the identity).
    Keywords: num (3), threshold (0), relative (0.1), out_type, threads, progress, cancel,
    quiet."""
    unknown_options(options, ("num", "threshold", "relative", "out_type", "threads", "progress",
                              "cancel", "quiet"), "peaks")
    keep = _Inputs()
    header = None
    if isinstance(fod, Result) and "wm_fod" in fod:
        fod_affine, fod = fod.affine, fod["wm_fod"]
    else:
        fod, fod_affine, header = _load(fod, "fod")
    if affine is not None:
        fod_affine = check_affine(affine)
    f = _numeric(fod, "fod")
    if f.ndim != 4 or min(f.shape) < 1:
        raise arg_error(f"fod: expected 4 dimensions (X, Y, Z, coefficients), got shape "
                        f"{f.shape}")
    n = f.shape[3]
    lmax = int(round((np.sqrt(8 * n + 1) - 3) / 2))
    if (lmax + 1) * (lmax + 2) // 2 != n or lmax % 2:
        raise arg_error(f"fod: {n} volumes is not a count of SH coefficients of even degree (1, "
                        f"6, 15, 28, 45, 66, 91, ...)")
    inp = _native.PeaksInput()
    inp.size = _C.sizeof(inp)
    inp.fod = _c_array(keep.hold(f))
    selected = None
    if mask is not None:
        inp.mask, selected = _mask(mask, f.shape[:3], fod_affine, keep)
    if not _all_finite(f, selected):
        raise arg_error("fod: NaN or infinite values" + (" inside the mask" if mask is not None
                                                           else "") +
                        " (give a mask that leaves them out)")
    if fod_affine is not None:
        inp.affine = keep.hold(np.ascontiguousarray(fod_affine, dtype=np.float64)).ctypes.data_as(
            _DP)
    opts = _native.PeaksOptions()
    opts.size = _C.sizeof(opts)
    opts.num = integer("num", options.get("num", 3), 1, 16)
    threshold = options.get("threshold", 0.0)
    relative = options.get("relative", 0.1)
    for name, v in (("threshold", threshold), ("relative", relative)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or \
                not np.isfinite(v):
            raise arg_error(f"{name}: expected a finite number, got {v!r}")
    if not 0 <= relative <= 1:
        raise arg_error(f"relative: {relative}; a fraction 0 to 1 of the voxel's largest peak")
    opts.threshold, opts.relative = float(threshold), float(relative)
    opts.out_type = out_type(options.get("out_type", "float32"))
    opts.threads = _threads(options)
    arrays, kinds, provenance, lines = call("dimoc.peaks", _lib.dimoc_peaks, inp, opts, options,
                                            keep)
    return Result(arrays, kinds, provenance, lines, fod_affine, header, "dimoc.peaks")
