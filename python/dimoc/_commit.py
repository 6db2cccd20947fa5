"""dimoc.commit: COMMIT's tractogram filtering on numpy arrays, through the C library's
dimoc_commit (include/dimoc.h), the run of `dimoc commit`: the same streamlines, data and
options give the same weights (streamline_weights.txt's, which prints them "%.5e") and the
same maps, as float32 as the command writes them.

Everything is checked here first (ValueError naming the argument, before any work); the C call
runs on a thread of its own, so that Ctrl-C raises KeyboardInterrupt at once."""
import math
import os
from collections.abc import Mapping

import numpy as np

from . import _native
from ._call import arg_error, check_affine
from ._fit import _c_array, _numeric
from ._native import lib as _lib
from ._track import _call, _count, _doubles, _image_array, _keep, _number, _streamlines
from ._track import _threads, _unknown

_C = _native.ctypes

MODELS = ("stick-zeppelin-ball", "cylinder-zeppelin-ball", "volume-fractions")
# The options of `dimoc commit` (cli/cmd_tractogram.c) as keywords, dashes as underscores
# ("lambda" is also lambda_, Python's word); those without one here: --tractogram, --data,
# --mask, --bvals, --bvecs (the arguments), --out and --format (no files), --stage, --part and
# --dictionary (the dictionary saved apart: the command's).  scheme: each volume's G, Delta and
# delta, (M, 3) or a mapping of those columns.
OPTIONS = ("model", "d_par", "d_perp", "d_iso", "radii", "scheme", "peaks", "fiber_shift",
           "min_seg_len", "min_length", "max_length", "blur_core_extent", "blur_gauss_extent",
           "blur_spacing", "blur_gauss_min", "blur_clust_thr", "blur_apply_to", "iso_mask",
           "confidence_map", "confidence_map_rescale", "vf_thr", "ndirs", "tol", "tol_x",
           "max_iter", "lambda", "lambda_", "lambda_group", "lambda_ec", "lambda_iso",
           "lambda_weights", "lambda_iso_weights", "allow_negative", "debias", "groups",
           "device", "gpus", "threads", "progress", "cancel", "quiet")


def _table(bvals, bvecs, gtab, M):
    """(b, g) checked: M b-values >= 0, M unit directions where b > 0 (FSL's frame)."""
    if gtab is not None:
        if bvals is not None or bvecs is not None:
            raise arg_error("gtab: given with bvals or bvecs; give one of them")
        try:
            bvals, bvecs = gtab.bvals, gtab.bvecs
        except AttributeError:
            raise arg_error("gtab: expected a DIPY GradientTable (with .bvals and .bvecs)") \
                from None
    if bvals is None or bvecs is None:
        raise arg_error(f"{'bvecs' if bvals is not None else 'bvals'}: not given (the data's "
                        f"b-values and directions; or gtab)")
    if isinstance(bvals, (str, os.PathLike)):
        bvals = np.loadtxt(os.fspath(bvals), ndmin=1)
    if isinstance(bvecs, (str, os.PathLike)):
        bvecs = np.loadtxt(os.fspath(bvecs), ndmin=2)
    b = np.asarray(_numeric(bvals, "bvals"), dtype=np.float64).ravel()
    if b.size != M:
        raise arg_error(f"bvals: {b.size} values for {M} volumes")
    if not np.isfinite(b).all() or (b < 0).any():
        raise arg_error("bvals: not finite numbers >= 0")
    g = np.asarray(_numeric(bvecs, "bvecs"), dtype=np.float64)
    if g.shape == (3, M) and M != 3:
        g = g.T
    if g.shape != (M, 3):
        raise arg_error(f"bvecs: shape {g.shape}; expected {M} directions, (M, 3) or (3, M)")
    g = np.array(g, order="C")
    g[np.isnan(g).any(axis=1) & (b <= 50)] = 0
    if not np.isfinite(g).all():
        raise arg_error("bvecs: not finite")
    length = np.linalg.norm(g, axis=1)
    bad = ((b > 0) & (np.abs(length - 1) > 0.01) & ~((length == 0) & (b <= 50))) | \
        ((b > 10) & ~((length > 0.5) & (length < 1.5)))
    if bad.any():
        j = int(np.nonzero(bad)[0][0])
        raise arg_error(f"bvecs: direction {j + 1} has length {length[j]:.4g} at b={b[j]:g}: a "
                        f"unit direction is needed where b > 0")
    if not (b > 10).any():
        raise arg_error("bvals: no diffusion-weighted measurements (every b <= 10)")
    return b, g


def _grid_array(x, what, grid, affine, keep, volumes=1):
    """An image argument on the data's grid as a dimoc_array: an array of that grid, or a
    nibabel image or path whose affine is the data's.  volumes: 1 (3D), 3 (X, Y, Z, 3P), or
    the data's M (3D, or 4D of M volumes)."""
    a, own, _ = _image_array(x, what)
    if a.ndim == 4 and a.shape[3] == 1 and volumes != 3:
        a = a[..., 0]
    ok = tuple(a.shape[:3]) == tuple(grid) and (
        a.ndim == 3 if volumes == 1 else
        a.ndim == 4 and a.shape[3] % 3 == 0 if volumes == 3 else
        a.ndim == 3 or (a.ndim == 4 and a.shape[3] == volumes))
    if not ok:
        want = {1: "", 3: " x 3 per peak"}.get(volumes, f" [x {volumes}]")
        raise arg_error(f"{what}: shape {a.shape}; expected the data's grid {tuple(grid)}{want}")
    if own is not None and affine is not None and not np.allclose(own, affine, atol=1e-4):
        raise arg_error(f"{what}: its affine differs from the data's (another grid)")
    return _c_array(_keep(keep, a))


def _per_streamline(x, what, keep):
    if isinstance(x, (str, os.PathLike)):
        x = np.loadtxt(os.fspath(x), ndmin=1)
    a = np.asarray(_numeric(x, what), dtype=np.float64).ravel()
    if not np.isfinite(a).all() or (a < 0).any():
        raise arg_error(f"{what}: not finite values >= 0")
    return _c_array(_keep(keep, np.ascontiguousarray(a, dtype=np.float32)))


def _list(x, what, keep, ok, max_n, scale=1.0):
    v = np.atleast_1d(np.asarray(x, dtype=np.float64)).ravel()
    if v.size == 0 or v.size > max_n or not np.isfinite(v).all() or not ok(v).all():
        raise arg_error(f"{what}: {x!r}; 1 to {max_n} values")
    return v.size, _doubles(v * scale, keep)


def commit(streamlines, data, bvals=None, bvecs=None, gtab=None, mask=None, affine=None,
           **options):
    """COMMIT's fit as `dimoc commit` makes it: a dimoc.Result with r["weights"] (float64, one
    per streamline, as streamline_weights.txt holds them with "%.5e"), the maps
    compartment_IC, compartment_EC, compartment_ISO (and the lesion model's), fit_RMSE,
    fit_NRMSE (and the adjusted ones with a confidence map), float32 on the data's grid as the
    command writes them; r.provenance, r.to_nifti(folder).

    streamlines: dimoc.Streamlines, any ArraySequence, a nibabel Tractogram or tractogram file
    object, the path of a .tck, .trk or .trx file (.trx needs trx-python),
    or a list of (N, 3) arrays in world mm.  data: (X, Y, Z, M) diffusion-weighted (X, Y, Z
    with model="volume-fractions"), a nibabel image or a path; affine: its voxel -> world
    matrix (from the image when it is one).  bvals, bvecs (FSL's frame) or gtab; mask: (X, Y,
    Z), segments outside it are left out.

    Every option of `dimoc commit`'s fit is a keyword of the same name, dashes as underscores:
    model, d_par, d_perp, d_iso, radii (micrometres), scheme ((M, 3) G Delta delta, or their
    columns by name), peaks, fiber_shift, min_seg_len, min_length, max_length,
    blur_core_extent, blur_gauss_extent, blur_spacing, blur_gauss_min, blur_clust_thr,
    blur_apply_to, iso_mask, confidence_map, confidence_map_rescale, vf_thr, ndirs, tol, tol_x,
    max_iter, lambda_ (or "lambda"), lambda_group, groups, lambda_ec, lambda_iso,
    lambda_weights, lambda_iso_weights, allow_negative, debias, device, gpus, threads; and
    progress, cancel, quiet as dimoc.fit takes them."""
    _unknown(options, OPTIONS, "commit", {"out": "no files: the weights and maps are returned",
                                          "stage": "the dictionary in parts is the command's"})
    o = dict(options)
    if "lambda_" in o:
        if "lambda" in o:
            raise arg_error("lambda_: given with lambda; give one")
        o["lambda"] = o.pop("lambda_")
    keep = []
    model = o.get("model", "stick-zeppelin-ball")
    if not isinstance(model, str) or model not in MODELS:
        raise arg_error(f"model: {model!r} is not one of {', '.join(MODELS)}")
    scalar, cylinder = model == "volume-fractions", model == "cylinder-zeppelin-ball"
    inp = _native.CommitInput()
    inp.size = _C.sizeof(inp)
    a, own, zooms = _image_array(data, "data")
    if affine is not None:
        if own is not None and not np.allclose(check_affine(affine), own, atol=1e-4):
            raise arg_error("affine: differs from the data image's own")
        own = check_affine(affine)
    if own is None:
        raise arg_error("affine: the data came as an array: give its affine (4x4, voxel -> "
                        "world: the streamlines are world mm)")
    if scalar and a.ndim == 4 and a.shape[3] == 1:
        a = a[..., 0]
    if a.ndim != (3 if scalar else 4) or min(a.shape) < 1:
        raise arg_error(f"data: shape {a.shape}; expected " +
                        ("a 3D map (X, Y, Z) for model volume-fractions" if scalar else
                         "4 dimensions (X, Y, Z, volumes)"))
    if a.dtype == np.uint8:
        a = a.astype(np.float32)
    grid = a.shape[:3]
    M = 1 if scalar else a.shape[3]
    inp.data.array = _c_array(_keep(keep, a))
    inp.data.affine = _doubles(own, keep)
    for name in ("bvals", "bvecs", "peaks", "d_par", "d_perp", "d_iso", "lambda_ec"):
        given = {"bvals": bvals, "bvecs": bvecs, "peaks": o.get("peaks")}.get(name, o.get(name))
        if scalar and (given is not None or (name == "bvals" and gtab is not None)):
            raise arg_error(f"{name}: not used by model volume-fractions (a scalar map)")
    if not scalar:
        b, g = _table(bvals, bvecs, gtab, M)
        inp.bvals, inp.bvecs = _doubles(b, keep), _doubles(g, keep)
    if mask is not None:
        inp.mask = _grid_array(mask, "mask", grid, own, keep)
    scheme = o.get("scheme")
    if not cylinder and (scheme is not None or o.get("radii") is not None):
        raise arg_error(f"{'scheme' if scheme is not None else 'radii'}: read by model "
                        f"cylinder-zeppelin-ball only")
    if cylinder:
        if scheme is None:
            raise arg_error("scheme: model cylinder-zeppelin-ball needs each volume's G, Delta "
                            "and delta")
        if isinstance(scheme, Mapping):
            try:
                scheme = np.stack([np.asarray(scheme[k], dtype=np.float64).ravel()
                                   for k in ("G", "Delta", "delta")], -1)
            except KeyError as e:
                raise arg_error(f"scheme: no column {e} (G, Delta and delta)") from None
        s = np.asarray(_numeric(scheme, "scheme"), dtype=np.float64)
        if s.shape != (M, 3) or not np.isfinite(s).all() or (s < 0).any():
            raise arg_error(f"scheme: shape {s.shape}; expected {M} rows of G, Delta, delta "
                            f"(finite, >= 0)")
        inp.pulses = _doubles(s, keep)
    if o.get("peaks") is not None:
        inp.peaks = _grid_array(o["peaks"], "peaks", grid, own, keep, volumes=3)
    for name in ("iso_mask", "lambda_iso_weights"):
        if o.get(name) is not None:
            setattr(inp, name, _grid_array(o[name], name, grid, own, keep))
    if o.get("confidence_map") is not None:
        inp.confidence_map = _grid_array(o["confidence_map"], "confidence_map", grid, own, keep,
                                         volumes=M)
    for name in ("groups", "blur_apply_to", "lambda_weights"):
        if o.get(name) is not None:
            setattr(inp, name, _per_streamline(o[name], name, keep))
    inp.streamlines, count, _ = _streamlines(streamlines, keep)
    if count == 0:
        raise arg_error("streamlines: none")
    for name in ("groups", "blur_apply_to", "lambda_weights"):
        n = getattr(inp, name).shape[0] if o.get(name) is not None else count
        if o.get(name) is not None and n != count and not o.get("blur_clust_thr"):
            raise arg_error(f"{name}: {n} values for {count} streamlines")
    opts = _options(o, keep)
    return _call(_lib.dimoc_commit, (inp, opts), o, keep, "dimoc.commit", np.array(own))


def _options(o, keep):
    """The dimoc_commit_options record, the values checked as the command checks them."""
    c = _native.CommitOptions()
    c.size = _C.sizeof(c)
    c.model = o.get("model", "stick-zeppelin-ball").encode()
    c.d_par = float("nan") if o.get("d_par") is None else _number(
        "d_par", o["d_par"], lambda v: v > 0, "a diffusivity > 0 (mm^2/s)")
    if o.get("d_perp") is not None:
        c.nd_perp, c.d_perp = _list(o["d_perp"], "d_perp", keep, lambda v: v >= 0, 20)
    if o.get("d_iso") is not None:
        c.nd_iso, c.d_iso = _list(o["d_iso"], "d_iso", keep, lambda v: v >= 0, 8)
    if o.get("radii") is not None:
        c.nradii, c.radii = _list(o["radii"], "radii", keep, lambda v: v > 0, 64)
    shift = np.atleast_1d(np.asarray(o.get("fiber_shift", 0), dtype=np.float64)).ravel()
    if shift.size not in (1, 3) or not np.isfinite(shift).all():
        raise arg_error(f"fiber_shift: {o.get('fiber_shift')!r}; one or three numbers (voxels)")
    c.fiber_shift[:] = tuple(np.broadcast_to(shift, (3,)))
    defaults = {"min_seg_len": 1e-3, "min_length": 0.0, "max_length": 250.0,
                "blur_core_extent": 0.0, "blur_gauss_extent": 0.0, "blur_spacing": 0.25,
                "blur_gauss_min": 0.1, "blur_clust_thr": 0.0, "vf_thr": 0.1, "tol": 1e-3,
                "tol_x": 1e-6, "lambda": 0.0, "lambda_group": 0.0, "lambda_ec": 0.0,
                "lambda_iso": 0.0}
    fractions = ("lambda", "lambda_group", "lambda_ec", "lambda_iso", "vf_thr")
    for name, value in defaults.items():
        v = value if o.get(name) is None else _number(
            name, o[name], (lambda x: 0 <= x <= 1) if name in fractions else (lambda x: x >= 0),
            "a number in [0, 1]" if name in fractions else "a number >= 0")
        setattr(c, name, v)
    if c.max_length <= c.min_length:
        raise arg_error(f"max_length: {c.max_length:g} must exceed min_length {c.min_length:g}")
    blur = c.blur_core_extent > 0 or c.blur_gauss_extent > 0
    if blur and not (c.blur_spacing > 0 and 0 < c.blur_gauss_min < 1):
        raise arg_error("blur_spacing: must be > 0, and blur_gauss_min in (0, 1)")
    if o.get("blur_apply_to") is not None and not blur:
        raise arg_error("blur_apply_to: needs a blur (blur_core_extent or blur_gauss_extent > 0)")
    c.confidence_map_rescale = int(bool(o.get("confidence_map_rescale", False)))
    if c.confidence_map_rescale and o.get("confidence_map") is None:
        raise arg_error("confidence_map_rescale: needs confidence_map")
    c.ndirs = _count("ndirs", o.get("ndirs", 500), 1, 65535)
    c.max_iter = _count("max_iter", o.get("max_iter", 100), 1, 100000000)
    if o.get("lambda_weights") is not None and not c.__getattribute__("lambda") > 0:
        raise arg_error("lambda_weights: weighs the lasso of lambda: give lambda > 0 too")
    if o.get("lambda_iso_weights") is not None and not c.lambda_iso > 0:
        raise arg_error("lambda_iso_weights: weighs the lasso of lambda_iso: give lambda_iso > 0")
    if (c.lambda_group > 0) != (o.get("groups") is not None):
        raise arg_error("groups: lambda_group and groups go together")
    c.debias = int(bool(o.get("debias", False)))
    if c.debias and not (getattr(c, "lambda") > 0 or c.lambda_group > 0 or c.lambda_ec > 0 or
                         c.lambda_iso > 0):
        raise arg_error("debias: refits a regularised fit: give lambda, lambda_group, lambda_ec "
                        "or lambda_iso too")
    neg = o.get("allow_negative")
    if neg is not None:
        names = neg.split(",") if isinstance(neg, str) else list(neg)
        if not names or any(n not in ("ic", "ec", "iso") for n in names):
            raise arg_error(f"allow_negative: {neg!r} is not a list of ic, ec, iso")
        c.allow_negative = _keep(keep, ",".join(names).encode())
    c.threads = _threads(o)
    device = o.get("device", "auto")
    if device not in ("auto", "cpu", "gpu"):
        raise arg_error(f"device: {device!r} is not one of auto, cpu, gpu")
    c.device = device.encode()
    gpus = o.get("gpus", 0)
    c.gpus = str(gpus if isinstance(gpus, str) else _count("gpus", gpus, 0, 1024)).encode()
    if not math.isnan(c.d_par) and o.get("model") == "volume-fractions":
        raise arg_error("d_par: not used by model volume-fractions (a scalar map)")
    return c
