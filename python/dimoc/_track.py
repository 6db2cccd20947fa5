"""dimoc.track, dimoc.tdi and dimoc.connectome: FOD tractography and what follows it on numpy
arrays, through the C library's dimoc_track, dimoc_tdi and dimoc_connectome (include/dimoc.h),
the engines of `dimoc track --fod`, `dimoc tdi` and `dimoc connectome`: the same inputs and
options give the same streamlines point for point (float32, world mm), the same map and the
same matrices.

Streamlines come back as nibabel's ArraySequence (dimoc.Streamlines, a subclass that also
carries the run's provenance), over the library's memory; any ArraySequence, nibabel
Tractogram or tractogram file, or list of (N, 3) arrays goes in.  Everything is checked here
first (ValueError naming the argument, before any work); the C call runs on a thread of its
own, so that Ctrl-C raises KeyboardInterrupt at once and leaves the library ready."""
import math
import os

import numpy as np

from . import _native
from ._call import Cancelled, Result, arg_error, check_affine, check_cancel, nibabel, reporter
from ._call import run, take_result, warnings_of
from ._fit import _c_array, _is_image, _load, _numeric
from ._native import lib as _lib

_C = _native.ctypes

# The options of `dimoc track --fod` (cli/cmd_track.c) as keywords, dashes as underscores,
# besides track()'s arguments; those of the command without one here: --fod, --seed (the
# arguments), --out and --format (no files), --tdi, --tdi-voxel, --tdi-exact (dimoc.tdi on the
# streamlines), --connectome (dimoc.connectome), --weights (1 each: np.ones).
TRACK_OPTIONS = ("seed_random_per_voxel", "seeds", "step", "angle", "cutoff", "seed_cutoff",
                 "min_length", "max_length", "trials", "power", "samples",
                 "max_attempts_per_seed", "unidirectional", "include", "exclude", "mask", "stop",
                 "act", "backtrack", "crop_at_gmwmi", "seed_gmwmi", "rseed", "threads", "device",
                 "gpus", "gpu_memory", "precision", "part", "voxel_size", "progress", "cancel",
                 "quiet")
ALGORITHMS = ("ifod2", "ifod1", "sd_stream")
_NSH = (6, 15, 28, 45, 66, 91)


try:
    from nibabel.streamlines import ArraySequence as _ArraySequence
except ImportError:
    raise ImportError("dimoc.track, dimoc.tdi and dimoc.connectome need nibabel (pip install "
                      "nibabel): streamlines are its ArraySequence") from None


class Streamlines(_ArraySequence):
    """Streamlines in world millimetres (nibabel's ArraySequence: s[i] is the (N_i, 3) float32
    points of streamline i), as `dimoc track` writes them to tracks.tck.  .provenance: the
    run's provenance.json (a dict); .step_size: the step (mm) the .tck header gives, which
    dimoc.tdi's upsampling reads; .warnings."""
    provenance = None
    step_size = None
    warnings = ()


def _keep(keep, x):
    keep.append(x)
    return x


def _image_array(x, what):
    """(array read in place where it can be, affine or None, voxel sizes or None)."""
    array, affine, header = _load(x, what)
    a = np.asanyarray(array)
    if a.dtype == np.bool_:
        a = a.view(np.uint8)
    elif a.dtype != np.uint8:
        a = _numeric(a, what)
    zooms = None
    if header is not None and hasattr(header, "get_zooms"):
        zooms = np.array(header.get_zooms()[:3], dtype=np.float64)
    return a, affine, zooms


def _image(x, what, keep, volumes=1, ref=None):
    """The dimoc_image of an image argument: an array (on ref's grid: ref = (shape, affine)),
    a nibabel image or a path (with their own grid).  volumes: 1, a 3D image; 5, X x Y x Z x
    5; 0, any 4D."""
    a, affine, zooms = _image_array(x, what)
    if volumes == 1 and a.ndim == 4 and a.shape[3] == 1:
        a = a[..., 0]
    want = {1: "3 dimensions (X, Y, Z)", 5: "4 dimensions (X, Y, Z, 5)",
            0: "4 dimensions (X, Y, Z, K)"}[volumes]
    if a.ndim != (3 if volumes == 1 else 4) or (volumes == 5 and a.shape[3] != 5) or \
            min(a.shape) < 1:
        raise arg_error(f"{what}: shape {a.shape}; expected {want}")
    im = _native.Image()
    im.array = _c_array(_keep(keep, a))
    if affine is None:
        if ref is None:
            raise arg_error(f"{what}: an array without its grid: give affine (4x4, voxel -> world)")
        if tuple(a.shape[:3]) != tuple(ref[0]):
            raise arg_error(f"{what}: shape {a.shape[:3]} is not the FOD's grid {tuple(ref[0])}: "
                            f"give it as a nibabel image (with its affine) to use another grid")
        return im
    im.affine = _doubles(check_affine(affine), keep)
    if zooms is not None:
        if not (np.isfinite(zooms).all() and (zooms > 0).all()):
            raise arg_error(f"{what}: its header's voxel sizes {zooms} are not sizes > 0")
        im.voxel_size = _doubles(zooms, keep)
    return im


def _doubles(values, keep):
    a = _keep(keep, np.ascontiguousarray(values, dtype=np.float64))
    return a.ctypes.data_as(_C.POINTER(_C.c_double))


def _images(x, what, keep, ref):
    """A list of region images (one image, or a list or tuple of them)."""
    if x is None:
        return []
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    return [_image(v, f"{what}[{i}]" if len(items) > 1 else what, keep, 1, ref)
            for i, v in enumerate(items)]


def _count(name, value, lo, hi=1 << 40):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise arg_error(f"{name}: expected an integer, got {value!r}")
    if not lo <= int(value) <= hi:
        raise arg_error(f"{name}: {value} is outside {lo}..{hi}")
    return int(value)


def _number(name, value, ok, what):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise arg_error(f"{name}: expected a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v) or not ok(v):
        raise arg_error(f"{name}: {value!r}; expected {what}")
    return v


def _choice(name, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise arg_error(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return value.encode()


def _unknown(options, known, fn, hints=None):
    unknown = [k for k in options if k not in known]
    if unknown:
        hint = ""
        for k in unknown:
            if hints and k in hints:
                hint = f" ({k}: {hints[k]})"
        raise arg_error(f"{fn}: unknown option{'s' * (len(unknown) > 1)} "
                        f"{', '.join(map(repr, unknown))}{hint}; the options are "
                        f"{', '.join(known)}")


def _track_options(algorithm, select, o):
    """The dimoc_track_options record, every option checked as the command checks it."""
    t = _native.TrackOptions()
    t.size = _C.sizeof(t)
    t.algorithm = _choice("algorithm", algorithm, ALGORITHMS)
    t.select = t.seeds = -1
    per_voxel = o.get("seed_random_per_voxel")
    if select is not None:
        t.select = _count("select", select, 0)
    if o.get("seeds") is not None:
        t.seeds = _count("seeds", o["seeds"], 0)
    t.seed_random_per_voxel = 0 if per_voxel is None else _count("seed_random_per_voxel",
                                                                 per_voxel, 1)
    if t.seed_random_per_voxel and (select is not None or o.get("seeds") is not None):
        raise arg_error("seed_random_per_voxel: it fixes the seeds; it cannot go with select or "
                        "seeds")
    if t.select == 0 and t.seeds in (-1, 0) and not t.seed_random_per_voxel:
        raise arg_error("select: 0 needs seeds=N (or the run would not end)")
    nan = float("nan")
    numbers = {"step": (lambda v: v > 0, "a step > 0 (mm)"),
               "angle": (lambda v: 0 < v <= 90, "an angle in (0, 90] degrees"),
               "cutoff": (lambda v: v >= 0, "an FOD amplitude >= 0"),
               "seed_cutoff": (lambda v: v >= 0, "an FOD amplitude >= 0"),
               "min_length": (lambda v: v >= 0, "a length >= 0 (mm)"),
               "max_length": (lambda v: v > 0, "a length > 0 (mm)"),
               "power": (lambda v: v > 0, "a power > 0")}
    for name, (ok, what) in numbers.items():
        value = o.get(name)
        setattr(t, name, nan if value is None else _number(name, value, ok, what))
    if not math.isnan(t.min_length) and not math.isnan(t.max_length) and \
            t.max_length <= t.min_length:
        raise arg_error(f"max_length: {t.max_length:g} must exceed min_length {t.min_length:g}")
    t.trials = -1 if o.get("trials") is None else _count("trials", o["trials"], 1)
    t.samples = -1 if o.get("samples") is None else _count("samples", o["samples"], 2, 9)
    t.max_attempts_per_seed = (-1 if o.get("max_attempts_per_seed") is None else
                               _count("max_attempts_per_seed", o["max_attempts_per_seed"], 1))
    for name in ("unidirectional", "stop", "backtrack", "crop_at_gmwmi"):
        setattr(t, name, int(bool(o.get(name, False))))
    t.rseed = _count("rseed", o.get("rseed", 0), 0, 2 ** 63 - 1)
    t.threads = 0 if o.get("threads") is None else _count("threads", o["threads"], 1, 4096)
    t.device = _choice("device", o.get("device", "auto"), ("auto", "cpu", "gpu"))
    gpus = o.get("gpus", 0)
    t.gpus = str(_count("gpus", gpus, 0, 1024) if not isinstance(gpus, str) else gpus).encode()
    t.gpu_memory = 0 if o.get("gpu_memory") is None else _count("gpu_memory", o["gpu_memory"],
                                                                 1, 1 << 30)
    t.precision = _choice("precision", o.get("precision", "float"), ("float", "double"))
    part = o.get("part")
    if part is not None:
        if not isinstance(part, str):
            part = "/".join(str(int(v)) for v in part)
        k, _, n = part.partition("/")
        if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
            raise arg_error(f"part: {part!r} is not K/N with 1 <= K <= N")
        if not t.seed_random_per_voxel and (t.select > 0 or t.seeds <= 0):
            raise arg_error("part: a fixed seed count is needed: seeds=N (or "
                            "seed_random_per_voxel), and no select")
        t.part = part.encode()
    if (t.backtrack or t.crop_at_gmwmi) and o.get("act") is None:
        raise arg_error(f"{'backtrack' if t.backtrack else 'crop_at_gmwmi'}: needs act")
    if t.backtrack and algorithm == "sd_stream":
        raise arg_error("backtrack: works with ifod1 and ifod2, not sd_stream")
    if t.backtrack and t.stop:
        raise arg_error("backtrack: cannot go with stop")
    return t


def track(fod, affine=None, seed=None, algorithm="ifod2", select=None, **options):
    """FOD tractography as `dimoc track --fod` (MRtrix tckgen's algorithms, defaults and rules);
    returns dimoc.Streamlines (nibabel's ArraySequence) in world mm: the streamlines the
    command writes to tracks.tck for the same images, options and rseed, point for point.

    fod: (X, Y, Z, K) SH coefficients in MRtrix's basis (dimoc csd's wm_fod), a nibabel image or
    a path; affine: its voxel -> world matrix (from the image when it is one).  seed: a mask
    (seeds at random positions in its voxels >= 0.5): an array on the FOD's grid, or a nibabel
    image or path on any grid; or seed_gmwmi= (with act=) instead.

    Every option of `dimoc track --fod` is a keyword of the same name, dashes as underscores:
    algorithm ("ifod2", "ifod1", "sd_stream"), select, seeds, seed_random_per_voxel, step,
    angle, cutoff, seed_cutoff, min_length, max_length, trials, power, samples,
    max_attempts_per_seed, unidirectional, include, exclude, mask (an image or a list of
    them), stop, act, backtrack, crop_at_gmwmi, seed_gmwmi, rseed, threads, device, gpus,
    gpu_memory, precision, part; voxel_size (the FOD's header voxel sizes where they are not
    the affine's column lengths; from the image when it is one).  And progress (None: a tqdm
    bar when tqdm is installed; False; or a callable(stage, fraction)), cancel (a
    threading.Event: set, the tracking stops and dimoc.Cancelled is raised), quiet.

    Raises ValueError (a TypeError too) naming the argument for anything wrong, before any
    work; KeyboardInterrupt on Ctrl-C, with the tracking stopped."""
    _unknown(options, TRACK_OPTIONS, "track", {
        "tdi": "dimoc.tdi(streamlines, ...)", "connectome": "dimoc.connectome(streamlines, ...)",
        "weights": "1 per streamline", "out": "no files: the streamlines are returned"})
    keep = []
    inp = _native.TrackInput()
    inp.size = _C.sizeof(inp)
    a, fod_affine, zooms = _image_array(fod, "fod")
    if affine is not None:
        if fod_affine is not None and not np.allclose(check_affine(affine), fod_affine,
                                                      atol=1e-4):
            raise arg_error("affine: differs from the FOD image's own")
        fod_affine = check_affine(affine)
    if fod_affine is None:
        raise arg_error("affine: the FOD came as an array: give its affine (4x4, voxel -> world)")
    if a.ndim != 4 or a.shape[3] not in _NSH or min(a.shape) < 1:
        raise arg_error(f"fod: shape {a.shape}; expected (X, Y, Z, K) with K one of "
                        f"{', '.join(map(str, _NSH))} (SH coefficients of even degree 2 to 12)")
    if a.dtype == np.uint8:
        a = a.astype(np.float32)
    inp.fod.array = _c_array(_keep(keep, a))
    inp.fod.affine = _doubles(fod_affine, keep)
    if options.get("voxel_size") is not None:
        zooms = np.asarray(options["voxel_size"], dtype=np.float64)
        if zooms.shape != (3,) or not (np.isfinite(zooms).all() and (zooms > 0).all()):
            raise arg_error(f"voxel_size: {options['voxel_size']!r}; three sizes > 0 (mm)")
    if zooms is not None:
        inp.fod.voxel_size = _doubles(zooms, keep)
    ref = (a.shape[:3], fod_affine)
    gmwmi = options.get("seed_gmwmi")
    if (seed is None) == (gmwmi is None):
        raise arg_error("seed: give one of seed and seed_gmwmi")
    if gmwmi is not None and options.get("act") is None:
        raise arg_error("seed_gmwmi: needs act")
    if seed is not None:
        inp.seed = _image(seed, "seed", keep, 1, ref)
    else:
        inp.seed_gmwmi = _image(gmwmi, "seed_gmwmi", keep, 1, ref)
    if options.get("act") is not None:
        inp.act = _image(options["act"], "act", keep, 5, ref)
    regions = {k: _images(options.get(k), k, keep, ref) for k in ("include", "exclude", "mask")}
    if sum(map(len, regions.values())) > 16:
        raise arg_error("include: at most 16 include, exclude and mask images together")
    for k, ims in regions.items():
        arr = (_native.Image * max(len(ims), 1))(*ims)
        setattr(inp, "n" + k, len(ims))
        setattr(inp, k, _keep(keep, arr))
    opts = _track_options(algorithm, select, options)
    cancel = check_cancel(options.get("cancel"))
    report = reporter(options.get("progress"), bool(options.get("quiet", False)), "dimoc.track")

    def call(ctx, handle):
        return _lib.dimoc_track(_C.byref(inp), _C.byref(opts), _C.byref(ctx), _C.byref(handle))

    handle = run(call, _lib.dimoc_result_free, report, cancel, keep, "dimoc.track", Cancelled)
    arrays, _, provenance, lines = take_result(handle)
    warnings_of(lines)
    sl = Streamlines()
    offsets = arrays["offsets"]
    sl._data = arrays["points"]
    sl._offsets = offsets[:-1].view(np.int64)
    sl._lengths = np.diff(offsets).astype(np.intp)
    sl.provenance, sl.warnings = provenance, lines
    sl.step_size = provenance["results"]["step_mm"] if provenance else None
    return sl


# ---- streamlines in ----

def _tractogram_file(path, what):
    """The tractogram in a .tck, .trk or .trx file, its points in world millimetres."""
    if not os.path.isfile(path):
        raise arg_error(f"{what}: {path}: no such file")
    try:
        if path.lower().endswith(".trx"):
            from trx.trx_file_memmap import load as load_trx
            return load_trx(path)
        return nibabel(f"{what} from a file").streamlines.load(path)
    except ImportError as e:
        if "nibabel" in str(e):
            raise
        raise arg_error(f"{what}: {path}: reading TRX needs trx-python "
                        f"(pip install trx-python)") from None
    except Exception as e:
        raise arg_error(f"{what}: {path}: not a tractogram nibabel can read ({e})") from None


def _tractogram(x, what="streamlines"):
    """(ArraySequence or list, step_size or None) of whatever holds streamlines."""
    if isinstance(x, (str, os.PathLike)):
        x = _tractogram_file(os.fspath(x), what)
    step = getattr(x, "step_size", None)
    header = getattr(x, "header", None)
    if hasattr(x, "streamlines") and not hasattr(x, "_data"):  # a Tractogram or its file
        if step is None and isinstance(header, dict) and header.get("step_size") is not None:
            try:
                step = float(header["step_size"])
            except (TypeError, ValueError):
                step = None
        x = x.streamlines
    return x, step


def _streamlines(x, keep, what="streamlines"):
    """(dimoc_streamlines record, count, step_size or None): an ArraySequence crosses without a
    copy when its points are float32 in order; anything else is gathered into one array."""
    x, step = _tractogram(x, what)
    data = getattr(x, "_data", None)
    if data is not None and hasattr(x, "_offsets") and hasattr(x, "_lengths"):
        lengths = np.asarray(x._lengths, dtype=np.int64)
        starts = np.asarray(x._offsets, dtype=np.int64)
        ends = np.concatenate([[0], np.cumsum(lengths)])
        points = np.asarray(data)
        if points.ndim != 2 or (len(points) and points.shape[1] != 3):
            raise arg_error(f"{what}: points of shape {points.shape[1:]}; streamlines are (N, 3)")
        if not (len(starts) == len(lengths) and np.array_equal(starts, ends[:-1]) and
                ends[-1] <= len(points)):
            points = np.concatenate([points[s:s + n] for s, n in zip(starts, lengths)]) \
                if len(lengths) else np.zeros((0, 3), np.float32)
        points = points[:ends[-1]]
    else:
        try:
            items = [np.asarray(s) for s in x]
        except TypeError:
            raise arg_error(f"{what}: expected streamlines (nibabel's ArraySequence, a Tractogram, "
                            f"or a list of (N, 3) arrays)") from None
        for i, s in enumerate(items):
            if s.ndim != 2 or s.shape[1] != 3:
                raise arg_error(f"{what}: streamline {i} has shape {s.shape}; expected (N, 3)")
        ends = np.concatenate([[0], np.cumsum([len(s) for s in items])]).astype(np.int64)
        points = np.concatenate(items) if items else np.zeros((0, 3), np.float32)
    if points.dtype.kind not in "fiu":
        raise arg_error(f"{what}: points of dtype {points.dtype}; expected numbers")
    points = np.ascontiguousarray(points, dtype=np.float32)
    if not np.isfinite(points).all():
        bad = int(np.nonzero(~np.isfinite(points).all(axis=1))[0][0])
        line = int(np.searchsorted(ends, bad, side="right") - 1)
        raise arg_error(f"{what}: point {bad} (of streamline {line}) is not finite")
    offsets = _keep(keep, np.ascontiguousarray(ends, dtype=np.uint64))
    _keep(keep, points)
    rec = _native.StreamlinesRecord()
    rec.points = points.ctypes.data_as(_C.POINTER(_C.c_float))
    rec.offsets = offsets.ctypes.data_as(_C.POINTER(_C.c_uint64))
    rec.count = len(offsets) - 1
    return rec, rec.count, step


def _weights(weights, count, keep):
    if weights is None:
        return None
    if isinstance(weights, (str, os.PathLike)):
        weights = np.loadtxt(os.fspath(weights), ndmin=1)
    w = np.asarray(weights)
    if w.dtype.kind not in "fiu":
        raise arg_error(f"weights: dtype {w.dtype}; expected numbers")
    w = np.ascontiguousarray(w.ravel(), dtype=np.float32)
    if w.size != count:
        raise arg_error(f"weights: {w.size} values for {count} streamlines")
    if not (np.isfinite(w).all() and (w >= 0).all()):
        raise arg_error("weights: not finite values >= 0")
    return _keep(keep, w).ctypes.data_as(_C.POINTER(_C.c_float))


def _grid(affine, shape, zooms, what):
    """(shape, affine, voxel sizes or None) of a grid: affine a 4x4 with shape, or a nibabel
    image or a path (its grid)."""
    if isinstance(affine, (str, os.PathLike)) or _is_image(affine):
        img = nibabel(what).load(os.fspath(affine)) if not _is_image(affine) else affine
        if shape is not None and tuple(shape) != tuple(img.shape[:3]):
            raise arg_error(f"shape: {tuple(shape)} is not the template's {img.shape[:3]}")
        return tuple(img.shape[:3]), check_affine(img.affine), (
            np.array(img.header.get_zooms()[:3], dtype=np.float64) if zooms is None else zooms)
    if affine is None:
        raise arg_error(f"affine: the {what}'s grid is needed (a 4x4 matrix with shape, or an "
                        f"image)")
    affine = check_affine(affine)
    if shape is None:
        raise arg_error("shape: the grid's size (X, Y, Z) is needed with an affine")
    shape = tuple(shape)
    if len(shape) < 3 or not all(isinstance(n, (int, np.integer)) and n > 0 for n in shape[:3]):
        raise arg_error(f"shape: {shape}; expected three sizes > 0")
    return shape[:3], affine, zooms


def _call(fn, args, options, keep, label, affine):
    """The C call fn(*args, context, result) on a thread of its own (progress, cancel and quiet
    from options), its dimoc_result as a dimoc.Result."""
    cancel = check_cancel(options.get("cancel"))
    report = reporter(options.get("progress"), bool(options.get("quiet", False)), label)

    def call(ctx, handle):
        return fn(*[_C.byref(a) for a in args], _C.byref(ctx), _C.byref(handle))

    handle = run(call, _lib.dimoc_result_free, report, cancel, keep, label, Cancelled)
    arrays, kinds, provenance, lines = take_result(handle)
    warnings_of(lines)
    return Result(arrays, kinds, provenance, lines, affine=affine, label=label)


def _threads(options):
    return 0 if options.get("threads") is None else _count("threads", options["threads"], 1, 4096)


TDI_OPTIONS = ("voxel", "exact", "weights", "threads", "step_size", "voxel_size", "progress",
               "cancel", "quiet")


def tdi(streamlines, affine, shape=None, **options):
    """The track-density image `dimoc tdi` writes (tckmap -template): each voxel of the
    template's grid (or with voxel= the super-resolved one) counts the streamlines that visit
    it (uint32), or with weights= sums their weights (float32).  Returns a dimoc.Result:
    r["tdi"] the map (X, Y, Z), r.affine its grid's voxel -> world, r.to_nifti(folder).

    streamlines: dimoc.Streamlines, any ArraySequence, a nibabel Tractogram or tractogram file
    object, the path of a .tck, .trk or .trx file (.trx needs trx-python),
    or a list of (N, 3) arrays in world mm.  affine and shape: the template's grid (affine may
    instead be a nibabel image or a path: its grid).  Options, as the command's: voxel (mm:
    one size or three), exact, weights (one per streamline, or a file), threads; step_size (the
    streamlines' step, from which tckmap's upsampling comes: by default the Streamlines' or the
    tractogram file's, else none); voxel_size (the template header's voxel sizes); progress,
    cancel, quiet."""
    _unknown(options, TDI_OPTIONS, "tdi")
    keep = []
    inp = _native.TdiInput()
    inp.size = _C.sizeof(inp)
    zooms = options.get("voxel_size")
    if zooms is not None:
        zooms = np.asarray(zooms, dtype=np.float64)
        if zooms.shape != (3,) or not (np.isfinite(zooms).all() and (zooms > 0).all()):
            raise arg_error(f"voxel_size: {options['voxel_size']!r}; three sizes > 0 (mm)")
    grid, aff, zooms = _grid(affine, shape, zooms, "template")
    inp.shape[:] = grid
    inp.affine = _doubles(aff, keep)
    if zooms is not None:
        inp.voxel_size = _doubles(zooms, keep)
    inp.streamlines, count, step = _streamlines(streamlines, keep)
    if options.get("step_size") is not None:
        step = _number("step_size", options["step_size"], lambda v: v >= 0, "a step >= 0 (mm)")
    inp.step_size = 0.0 if step is None else float(step)
    inp.weights = _weights(options.get("weights"), count, keep)
    opts = _native.TdiOptions()
    opts.size = _C.sizeof(opts)
    voxel = options.get("voxel")
    if voxel is not None:
        v = np.atleast_1d(np.asarray(voxel, dtype=np.float64))
        if v.shape not in ((1,), (3,)) or not (np.isfinite(v).all() and (v > 0).all()):
            raise arg_error(f"voxel: {voxel!r}; one size > 0 in mm or three")
        opts.voxel[:] = tuple(np.broadcast_to(v, (3,)))
    opts.exact = int(bool(options.get("exact", False)))
    opts.threads = _threads(options)
    r = _call(_lib.dimoc_tdi, (inp, opts), options, keep, "dimoc.tdi", None)
    r._affine = np.array(r["affine"])
    return r


CONNECTOME_OPTIONS = ("weights", "threads", "progress", "cancel", "quiet")


def connectome(streamlines, parcellation, affine=None, **options):
    """The matrices `dimoc connectome` writes (tck2connectome's defaults: each end to the
    nearest labelled voxel within 4 mm): a dimoc.Result with r["connectome"] (streamlines per
    edge, or the sums of their weights) and r["mean_length"] (mm), nodes x nodes float64, the
    upper triangle with the diagonal (0 below) as connectome.csv and mean_length.csv hold
    them; r.provenance counts the streamlines assigned and not.

    streamlines: as dimoc.tdi takes them.  parcellation: integer labels 1..N (0: no node), an
    array with affine (its grid), or a nibabel image or a path.  Options: weights (one per
    streamline, or a file), threads, progress, cancel, quiet."""
    _unknown(options, CONNECTOME_OPTIONS, "connectome")
    keep = []
    inp = _native.ConnectomeInput()
    inp.size = _C.sizeof(inp)
    a, own, zooms = _image_array(parcellation, "parcellation")
    if own is not None and affine is not None and not np.allclose(check_affine(affine), own,
                                                                   atol=1e-4):
        raise arg_error("parcellation: its affine differs from affine (another grid)")
    aff = own if own is not None else affine
    if aff is None:
        raise arg_error("affine: the parcellation came as an array: give its affine (4x4)")
    if a.ndim == 4 and a.shape[3] == 1:
        a = a[..., 0]
    if a.ndim != 3 or min(a.shape) < 1:
        raise arg_error(f"parcellation: shape {a.shape}; expected 3 dimensions (X, Y, Z)")
    if a.dtype.kind == "f":
        finite = np.isfinite(a)
        if not finite.all() or (a[finite] != np.round(a[finite])).any():
            raise arg_error("parcellation: not whole numbers (integer node labels, 0: none)")
    if (a < 0).any():
        raise arg_error("parcellation: negative labels (node labels are 0 or positive)")
    inp.parcellation.array = _c_array(_keep(keep, a))
    inp.parcellation.affine = _doubles(check_affine(aff), keep)
    if zooms is not None:
        inp.parcellation.voxel_size = _doubles(zooms, keep)
    inp.streamlines, count, _ = _streamlines(streamlines, keep)
    inp.weights = _weights(options.get("weights"), count, keep)
    opts = _native.ConnectomeOptions()
    opts.size = _C.sizeof(opts)
    opts.threads = _threads(options)
    return _call(_lib.dimoc_connectome, (inp, opts), options, keep, "dimoc.connectome",
                 np.array(aff))
