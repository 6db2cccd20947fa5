"""dimoc.dti: the linear tensor fit of every voxel on numpy arrays, through the C library's
dimoc_dti (include/dimoc.h), the fit of `dimoc dti`: the same inputs and options give the same
maps, bit for bit (float32, as the command writes them).  Also the diffusion-weighted input that
the tensor fit, response estimation and CSD share (dwi_input).

Everything is checked here first (ValueError naming the argument, before any work); the C call
runs on a thread of its own, so that Ctrl-C raises KeyboardInterrupt at once."""
import numpy as np

from . import _native
from ._call import Cancelled, Result, arg_error, check_affine, check_cancel, reporter, run
from ._call import take_result, warnings_of
from ._fit import _all_finite, _c_array, _Inputs, _load, _mask, _numeric, _table, choice
from ._fit import integer
from ._native import lib as _lib

_C = _native.ctypes

# The options of `dimoc dti` (cli/cmd_dti.c) as keywords, dashes as underscores, besides dti()'s
# arguments; --out, --format and --prefix are the result's to_nifti's.
OPTIONS = ("method", "iter", "min_signal", "min_diffusivity", "save_tensor", "sse", "out_type",
           "threads", "grad", "affine", "progress", "cancel", "quiet")
# The keywords every call on a diffusion-weighted image takes.
DWI_OPTIONS = ("grad", "affine", "progress", "cancel", "quiet")


def unknown_options(options, allowed, name):
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise arg_error(f"{name}: unknown option{'s' * (len(unknown) > 1)} "
                        f"{', '.join(map(repr, unknown))}; the options are {', '.join(allowed)}")


def out_type(value):
    value = np.dtype(value).name if not isinstance(value, str) else value
    return choice("out_type", value, ("float32", "float64")).encode()


def dwi_input(data, bvals, bvecs, mask, gtab, options, keep, min_volumes=2, reader="CSD"):
    """The dimoc_dwi_input of the data (a 4-D array, a nibabel image or a path) and its table,
    checked: (record, grid, affine, header).  `reader` names the call in messages."""
    array, affine, header = _load(data, "data")
    data = _numeric(array, "data")
    if data.ndim != 4:
        raise arg_error(f"data: expected 4 dimensions (X, Y, Z, volumes), got shape "
                        f"{data.shape}")
    if min(data.shape) < 1 or data.shape[3] < min_volumes:
        raise arg_error(f"data: shape {data.shape}: at least {min_volumes} volumes are needed")
    grid, M = tuple(data.shape[:3]), data.shape[3]
    if options.get("affine") is not None:
        affine = check_affine(options["affine"])
    inp = _native.DwiInput()
    inp.size = _C.sizeof(inp)
    inp.data = _c_array(keep.hold(data))
    selected = None
    if mask is not None:
        inp.mask, selected = _mask(mask, grid, affine, keep)
    if not _all_finite(data, selected):
        raise arg_error("data: NaN or infinite values" + (" inside the mask" if mask is not None
                                                            else "") +
                        " (give a mask that leaves them out)")
    b, g, grad = _table(reader, M, bvals, bvecs, gtab, options.get("grad"), affine, keep)
    dp = _C.POINTER(_C.c_double)
    if b is not None:
        inp.bvals, inp.bvecs = b.ctypes.data_as(dp), g.ctypes.data_as(dp)
    if grad is not None:
        inp.grad = grad.ctypes.data_as(dp)
    if affine is not None:
        inp.affine = keep.hold(np.ascontiguousarray(affine, dtype=np.float64)).ctypes.data_as(dp)
    return inp, grid, affine, header


def call(name, fn, inp, opts, options, keep):
    """fn(input, options, context, handle) on a thread of its own, with the progress and cancel
    keywords; the result's (arrays, kinds, provenance, warnings), the warnings raised."""
    cancel = check_cancel(options.get("cancel"))
    report = reporter(options.get("progress"), bool(options.get("quiet", False)), name)

    def c_call(ctx, handle):
        return fn(_C.byref(inp), _C.byref(opts), _C.byref(ctx), _C.byref(handle))

    handle = run(c_call, _lib.dimoc_result_free, report, cancel, keep.keep, name, Cancelled)
    arrays, kinds, provenance, lines = take_result(handle)
    warnings_of(lines, stacklevel=5)
    return arrays, kinds, provenance, lines


def dti(data, bvals=None, bvecs=None, mask=None, gtab=None, **options):
    """Fits the diffusion tensor in every voxel by linear least squares, as `dimoc dti` does;
    returns a dimoc.Result: the command's maps by their file names, V1 V2 V3 (X, Y, Z, 3), L1
    L2 L3, FA, MD, MO, S0, and tensor (6 volumes, FSL's order) and sse when asked.

    data: a 4-D array (X, Y, Z, volumes), a nibabel image or a path.  bvals, bvecs: b-values
    (s/mm^2) and unit directions (FSL's frame, (M, 3) or (3, M)), or gtab, a DIPY
    GradientTable, or grad (MRtrix's M x 4 table) with affine (the image's by default).
    mask (X, Y, Z): fit where non-zero.

    Keywords, as the command's options: method ("wls", "ols"), iter (MRtrix dwi2tensor's -iter
    N, 0..10), min_signal, min_diffusivity ("auto", "none" or a number), save_tensor, sse,
    out_type ("float32", the command's; "float64"), threads; progress, cancel
    (dimoc.Cancelled), quiet, as for dimoc.fit.

    Raises ValueError (a TypeError too) naming the argument, before any work: data not 4-D or
    not numeric, NaN or Inf in the voxels to fit, bvals or bvecs of another length than the
    volumes or not unit, a mask of another grid, an option out of range."""
    unknown_options(options, OPTIONS, "dti")
    keep = _Inputs()
    inp, grid, affine, header = dwi_input(data, bvals, bvecs, mask, gtab, options, keep,
                                          min_volumes=7, reader="the tensor fit")
    opts = _native.DtiOptions()
    opts.size = _C.sizeof(opts)
    opts.method = choice("method", options.get("method", "wls"), ("wls", "ols")).encode()
    it = options.get("iter")
    opts.iter = -1 if it is None else integer("iter", it, 0, 10)
    ms = options.get("min_signal")
    if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float)) or
                           not 0 < ms < float("inf")):
        raise arg_error(f"min_signal: {ms!r}; a positive number (the log of it is taken)")
    opts.min_signal = 0.0 if ms is None else float(ms)
    md = options.get("min_diffusivity", "auto")
    if not isinstance(md, str):
        if isinstance(md, bool) or not isinstance(md, (int, float)) or not np.isfinite(md):
            raise arg_error(f"min_diffusivity: {md!r}; a number, 'auto' or 'none'")
        md = repr(float(md))
    elif md not in ("auto", "none"):
        raise arg_error(f"min_diffusivity: {md!r}; a number, 'auto' or 'none'")
    opts.min_diffusivity = keep.hold(md.encode())
    opts.save_tensor = int(bool(options.get("save_tensor", False)))
    opts.sse = int(bool(options.get("sse", False)))
    opts.out_type = out_type(options.get("out_type", "float32"))
    threads = options.get("threads")
    opts.threads = 0 if threads is None else integer("threads", threads, 1, 4096)
    arrays, kinds, provenance, lines = call("dimoc.dti", _lib.dimoc_dti, inp, opts, options, keep)
    return Result(arrays, kinds, provenance, lines, affine, header, "dimoc.dti")
