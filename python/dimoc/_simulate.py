"""dimoc.simulate: a model's signal in every voxel, with noise, on numpy arrays, through the C
library's dimoc_simulate (include/dimoc.h), the engine of `dimoc simulate`: the same inputs and
seed give the same image, bit for bit (float32, as the command writes it).

Everything is checked here first (ValueError naming the argument, before any work); the C call
runs on a thread of its own, so that Ctrl-C raises KeyboardInterrupt at once."""
import os
from collections.abc import Mapping

import numpy as np

from . import _native
from ._call import Cancelled, arg_error, check_affine, check_cancel, reporter, run, save_nifti
from ._call import take_result, warnings_of
from ._fit import FitResult, _c_array, _gradients, _Inputs, _load, _map_or_value
from ._fit import _measures, _named, _numeric, integer
from ._native import lib as _lib

_C = _native.ctypes

# The options of `dimoc simulate` (cli/cmd_simulate.c) taken as keywords besides simulate()'s
# arguments; --out and --mask-out are Simulation.to_nifti's.
OPTIONS = ("voxel", "measure", "scheme", "voxels", "out_type", "threads", "progress", "cancel",
           "quiet")
NOISE = ("none", "gaussian", "rician")


class Simulation(tuple):
    """(signal, mask) of a simulation: signal (X, Y, Z, M), float32 as `dimoc simulate` writes
    it (float64 with out_type="float64"), 0 outside the mask given; mask (X, Y, Z), uint8: 1
    where the noise-free signal is finite and positive.  .provenance, .warnings; .affine, the
    grid's (the maps' when they came as images, else the one given, else the command's 2 mm
    voxels); .to_nifti(path, mask_path=None) writes the files `dimoc simulate` writes."""

    def __new__(cls, signal, mask, provenance, warnings_, affine):
        self = super().__new__(cls, (signal, mask))
        self.provenance, self.warnings, self.affine = provenance, warnings_, affine
        return self

    @property
    def signal(self):
        return self[0]

    @property
    def mask(self):
        return self[1]

    def __repr__(self):
        return (f"<dimoc.Simulation signal {self.signal.shape} {self.signal.dtype}, "
                f"{int(self.mask.sum())} voxels of signal>")

    def to_nifti(self, path, mask_path=None):
        """The image (and the mask) as NIfTI files; needs nibabel.  Returns path."""
        save_nifti(os.fspath(path), self.signal, self.affine)
        if mask_path is not None:
            save_nifti(os.fspath(mask_path), self.mask, self.affine)
        return path


def _is_value(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _grid(params, voxel):
    """The grid and its affine (of the first map among params and voxel; None without one),
    and the maps read by (what, name)."""
    grid, affine = None, None
    read = {}
    for what, mapping in (("params", params), ("voxel", voxel)):
        for name, value in mapping.items():
            if _is_value(value):
                continue
            array, a, _ = _load(value, f"{what} {name}")
            read[(what, name)] = array
            shape = np.shape(array)
            if grid is None and len(shape) >= 3:
                grid, affine = tuple(shape[:3]), a
    return grid, affine, read


def _items(model, params, voxel, grid, read, keep):
    """(params, voxel inputs) as (name, dimoc_array) lists, checked against the model."""
    names = [p.name for p in model.parameters]
    unknown = [k for k in params if k not in names]
    if unknown:
        raise arg_error(f"params: model '{model.name}' has no parameter "
                        f"{', '.join(map(repr, unknown))} (it has: {', '.join(names)})")
    missing = [k for k in names if k not in params]
    if missing:
        raise arg_error(f"params: no value for parameter {', '.join(map(repr, missing))} of "
                        f"model '{model.name}' (every parameter needs a value or a map)")
    inputs = {x.name: x for x in model.voxel_inputs}
    unknown = [k for k in voxel if k not in inputs]
    if unknown:
        raise arg_error(f"voxel: model '{model.name}' has no per-voxel input "
                        f"{', '.join(map(repr, unknown))} (it has: "
                        f"{', '.join(inputs) or 'none'})")
    for x in inputs.values():
        if x.default is None and x.name not in voxel:
            raise arg_error(f"voxel: model '{model.name}' needs per-voxel input '{x.name}': "
                            f"give voxel={{'{x.name}': value or map}}")
    out = []
    for what, mapping, width in (("params", params, lambda n: 1),
                                 ("voxel", voxel, lambda n: inputs[n].width)):
        items = []
        for name, value in mapping.items():
            label = f"{what} {name}"
            if _is_value(value):
                a = keep.hold(np.array(float(value)))
                if not np.isfinite(a):
                    raise arg_error(f"{label}: {value} is not finite")
                items.append((name, _c_array(a)))
                continue
            array = read[(what, name)]
            items.append((name, _map_or_value(array, label, grid, width(name), keep, None)))
        out.append(items)
    return out


def _finite_inside(read, mask):
    """ValueError naming the first map with NaN or Inf in a voxel to simulate."""
    for (what, name), array in read.items():
        a = _numeric(array, f"{what} {name}")
        if a.dtype.kind != "f":
            continue
        bad = ~np.isfinite(a)
        if bad.ndim == 4:
            bad = bad.any(axis=3)
        if mask is not None:
            bad &= mask
        if bad.any():
            v = tuple(int(i) for i in np.argwhere(bad)[0])
            raise arg_error(f"{what} {name}: NaN or infinite values in voxels to simulate "
                            f"(first at {v}); give a mask that leaves them out")


def _protocol_length(bvals, gtab, measure, scheme):
    """M: the b-values' count, else the scheme columns' length, else the first measure's."""
    if bvals is not None:
        return int(np.size(bvals))
    if gtab is not None:
        return int(np.size(getattr(gtab, "bvals", [])))
    if isinstance(scheme, Mapping) and scheme:
        return int(np.size(next(iter(scheme.values()))))
    if isinstance(measure, Mapping) and measure:
        v = next(iter(measure.values()))
        if isinstance(v, (str, os.PathLike)):
            v = np.loadtxt(os.fspath(v), ndmin=1)
        return int(max(np.shape(v) or (1,)))
    raise arg_error("bvals: give bvals and bvecs (or gtab), a scheme or a measure to define the "
                    "protocol (one entry per volume)")


def simulate(model, bvals=None, bvecs=None, gtab=None, params=None, mask=None, noise="none",
             snr=30, seed=1, affine=None, **options):
    """Evaluates `model` in every voxel and adds noise, as `dimoc simulate` does; returns a
    Simulation, (signal, mask).

    model: a dimoc.Model or what Model() takes.  bvals, bvecs: the protocol, b-values (s/mm^2)
    and unit directions (FSL's frame, (M, 3) or (3, M)), or gtab, a DIPY GradientTable.
    params: every parameter of the model by name, a number or a map (X, Y, Z) (an array, a
    nibabel image or a path); a FitResult gives its parameters' maps.  The maps set the grid;
    with numbers only the image is voxels x 1 x 1.  mask (X, Y, Z): simulate where non-zero, 0
    elsewhere.  noise: "none", "gaussian" or "rician", with sigma = (the voxel's noise-free mean
    b = 0 signal) / snr; seed: the noise's (keyed by seed and voxel).  affine: the grid's
    voxel -> world matrix, for to_nifti (the maps' when they are images).

    Keywords, as the command's options: voxel ({name: value or map}, per-voxel inputs), measure
    ({name: values or a text file}), scheme ({column: values}), voxels, out_type ("float32",
    the command's; "float64"), threads; progress (None: a tqdm bar when tqdm is installed,
    False, or a callable(stage, fraction)), cancel (a threading.Event: dimoc.Cancelled is raised
    when it is set), quiet.

    Raises ValueError (a TypeError too) naming the argument, before any work; KeyboardInterrupt
    on Ctrl-C, with the simulation stopped."""
    from . import Model
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise arg_error(f"simulate: unknown option{'s' * (len(unknown) > 1)} "
                        f"{', '.join(map(repr, unknown))}; the options are {', '.join(OPTIONS)}")
    if not isinstance(model, Model):
        model = Model(model)
    keep = _Inputs()
    if params is None:
        raise arg_error(f"params: give every parameter of model '{model.name}' a value or a map "
                        f"({', '.join(p.name for p in model.parameters)})")
    if isinstance(params, FitResult):
        params = params.parameters
    if not isinstance(params, Mapping):
        raise arg_error("params: expected a mapping of parameter names to values or maps")
    voxel = options.get("voxel") or {}
    if not isinstance(voxel, Mapping):
        raise arg_error("voxel: expected a mapping of per-voxel input names to values or maps")
    if noise not in NOISE:
        raise arg_error(f"noise: {noise!r} is not one of {', '.join(NOISE)}")
    if noise != "none" and (not _is_value(snr) or not 0 < float(snr) < float("inf")):
        raise arg_error(f"snr: {snr!r}; noise needs a finite snr > 0")
    seed = integer("seed", seed, 0, 2**63 - 1)
    voxels = integer("voxels", options.get("voxels", 1), 1, 100000000)
    out_type = options.get("out_type", "float32")
    out_type = np.dtype(out_type).name if not isinstance(out_type, str) else out_type
    if out_type not in ("float32", "float64"):
        raise arg_error(f"out_type: {out_type!r} is not float32 or float64")
    threads = options.get("threads")
    threads = 0 if threads is None else integer("threads", threads, 1, 4096)

    grid, map_affine, read = _grid(params, voxel)
    marray, maffine = (None, None) if mask is None else _load(mask, "mask")[:2]
    if grid is None:  # values only: voxels x 1 x 1, as many as the mask has
        mshape = np.shape(marray) if mask is not None else (voxels, 1, 1)
        if len(mshape) != 3 or mshape[1:] != (1, 1):
            raise arg_error(f"mask: shape {mshape}; with values only (no map among the params) "
                            f"the grid is voxels x 1 x 1")
        if "voxels" in options and mshape[0] != voxels:
            raise arg_error(f"voxels: {voxels}, but the mask has {mshape[0]} voxels")
        voxels = mshape[0]
        grid = (voxels, 1, 1)
    inp = _native.SimulateInput()
    inp.size = _C.sizeof(inp)
    mask_bool = None
    if mask is not None:
        m = np.asanyarray(marray)
        if m.dtype == np.bool_:
            m = m.view(np.uint8)
        elif m.dtype != np.uint8:
            m = _numeric(m, "mask")
        if m.shape != grid:
            raise arg_error(f"mask: shape {m.shape} is not the maps' grid {grid}")
        if maffine is not None and map_affine is not None and \
                not np.allclose(maffine, map_affine, atol=1e-4):
            raise arg_error("mask: its affine differs from the maps' (another grid)")
        mask_bool = (m != 0) & ~np.isnan(m) if m.dtype.kind == "f" else m != 0
        inp.mask = _c_array(keep.hold(m))
    param_items, voxel_items = _items(model, params, voxel, grid, read, keep)
    _finite_inside(read, mask_bool)
    inp.nparams, inp.params = len(param_items), _named(param_items, keep)
    inp.nvoxel_inputs, inp.voxel_inputs = len(voxel_items), _named(voxel_items, keep)

    measure, scheme = options.get("measure"), options.get("scheme")
    M = _protocol_length(bvals, gtab, measure, scheme)
    inp.volumes = M
    b, g, _ = _gradients(model, M, bvals, bvecs, gtab, None, None, keep)
    dp = _C.POINTER(_C.c_double)
    if b is not None:
        inp.bvals, inp.bvecs = b.ctypes.data_as(dp), g.ctypes.data_as(dp)
    measures = _measures(model, M, measure, scheme, keep)
    inp.nmeasures, inp.measures = len(measures), _named(measures, keep)

    opts = _native.SimulateOptions()
    opts.size = _C.sizeof(opts)
    opts.noise = noise.encode()
    opts.snr = float(snr)
    opts.seed = seed
    opts.voxels = voxels
    opts.out_type = out_type.encode()
    opts.threads = threads
    if affine is not None:
        affine = check_affine(affine)
    elif map_affine is not None or maffine is not None:
        affine = map_affine if map_affine is not None else np.asarray(maffine, np.float64)
    else:  # the command's geometry of an image without maps: 2 mm voxels
        affine = np.diag([2.0, 2.0, 2.0, 1.0])

    cancel = check_cancel(options.get("cancel"))
    report = reporter(options.get("progress"), bool(options.get("quiet", False)),
                      "dimoc.simulate")

    def call(ctx, handle):
        return _lib.dimoc_simulate(model._handle, _C.byref(inp), _C.byref(opts), _C.byref(ctx),
                                   _C.byref(handle))

    keep.keep.append(model)
    handle = run(call, _lib.dimoc_result_free, report, cancel, keep.keep, "dimoc.simulate",
                 Cancelled)
    arrays, _, provenance, lines = take_result(handle)
    warnings_of(lines)
    return Simulation(arrays["signal"], arrays["mask"], provenance, lines, affine)
