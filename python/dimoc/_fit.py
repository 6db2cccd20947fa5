"""dimoc.fit: a model fitted voxel by voxel on numpy arrays, through the C library's dimoc_fit
(include/dimoc.h), the engine of `dimoc fit`: the same inputs and options give the same maps,
bit for bit.

The arrays cross without a copy where they can (float32 or float64 data in any layout numpy
makes: C or Fortran order, views).  Everything is checked here first, so that a wrong argument
raises ValueError naming it before any work starts.  The library runs the fit on a thread of
its own with the GIL released (ctypes releases it for every call); the calling thread waits,
so that Ctrl-C raises KeyboardInterrupt at once: the fit is asked to stop (its next piece of
work), and the library is ready for the next call."""
import json
import os
import warnings
from collections.abc import Mapping

import numpy as np

from . import _native
from ._call import Cancelled, DimocWarning, Owner, check_cancel, reporter, run
from ._call import arg_error as _arg_error
from ._native import lib as _lib

_C = _native.ctypes

# The options of `dimoc fit` (cli/cmd_fit.c) taken as keywords, dashes as underscores; besides
# them the arguments of fit() itself.  Those of the command without a keyword here: --data,
# --mask, --bvals, --bvecs (arguments), --out and --format (FitResult.to_nifti), --then (fit
# again with init_from=the result), --stage-options.
OPTIONS = ("dictionary_penalty", "grid", "fixed", "init", "init_from", "voxel", "measure",
           "scheme", "noise", "burnin", "jumps", "sample_every", "update_every", "seed",
           "lm_iterations", "save_samples", "predicted", "ic", "out_type", "precision", "threads",
           "gpus", "gpu_memory", "lanes", "part", "quiet", "grad", "affine", "progress", "cancel")
METHODS = ("grid", "dictionary", "lm", "mcmc")
_RANGES = {"burnin": (0, 100000000), "jumps": (1, 100000000), "sample_every": (1, 100000000),
           "update_every": (1, 100000000), "lm_iterations": (1, 100000000), "seed": (0, 2**63 - 1),
           "threads": (1, 4096), "gpu_memory": (1, 1 << 30), "lanes": (1, 32)}
_DEFAULTS = {"noise": "gaussian", "burnin": 1000, "jumps": 1250, "sample_every": 25,
             "update_every": 40, "lm_iterations": 200, "seed": 42, "out_type": "float32",
             "precision": "double", "gpus": "all"}
STATUS = {0: "outside", 1: "fitted", 2: "not converged", 3: "skipped: NaN/Inf",
          4: "skipped: all zero", 5: "failed", 6: "at a bound"}


class FitCancelled(Cancelled):
    """A fit stopped by its `cancel` event (Ctrl-C raises KeyboardInterrupt instead)."""


class FitResult(Mapping):
    """The maps of a fit, by name: each parameter (S0, d, ...), its posterior sd (S0_sd) after
    MCMC, the samples (S0_samples, with save_samples), each output of the model (dyads1, ...),
    BIC and AIC (ic), predicted (predicted): numpy arrays on the data's grid, (X, Y, Z) or
    (X, Y, Z, k), 0 where a voxel has no estimate.  The names are those of the files `dimoc fit`
    writes.

    .status: the status of every voxel (uint8: 0 outside the mask, 1 fitted, 2 not converged,
    3 skipped for NaN/Inf, 4 skipped: all zero, 5 failed, 6 at a bound); .provenance: what ran
    (provenance.json, as a dict); .warnings: the library's warnings; .to_nifti(folder): the
    files `dimoc fit` writes."""

    def __init__(self, maps, kinds, status, provenance, warnings_, affine, header):
        self._maps, self._kinds = maps, kinds
        self.status = status
        self.provenance = provenance
        self.warnings = warnings_
        self._affine, self._header = affine, header

    def __getitem__(self, name):
        return self._maps[name]

    def __iter__(self):
        return iter(self._maps)

    def __len__(self):
        return len(self._maps)

    def kind(self, name):
        """"parameter", "std", "samples", "output", "dispersion", "ic" or "predicted"."""
        return self._kinds[name]

    @property
    def parameters(self):
        """The parameters' maps alone, by name (what init_from takes)."""
        return {k: v for k, v in self._maps.items() if self._kinds[k] == "parameter"}

    def counts(self):
        """Voxels by status ({"fitted": n, ...}, the statuses that occur)."""
        values, counts = np.unique(self.status, return_counts=True)
        return {STATUS.get(int(v), str(v)): int(c) for v, c in zip(values, counts)}

    def __repr__(self):
        shape = "x".join(map(str, self.status.shape))
        return f"<dimoc.FitResult {shape}: {', '.join(self._maps)}; {self.counts()}>"

    def to_nifti(self, folder, affine=None):
        """Writes every map as FOLDER/NAME.nii.gz (the status as uint8), and provenance.json,
        as `dimoc fit --out FOLDER` does; affine (4x4, voxel -> world mm) defaults to the
        data's when it came as a NIfTI image or path.  Needs nibabel.  Returns the folder."""
        nib = _nibabel("to_nifti")
        if affine is None:
            affine = self._affine
        if affine is None:
            raise _arg_error("affine: the data came as an array: give the affine (4x4) of its "
                             "grid")
        affine = np.asarray(affine, dtype=np.float64)
        if affine.shape != (4, 4) or not np.isfinite(affine).all():
            raise _arg_error(f"affine: expected a finite 4x4 matrix, got shape {affine.shape}")
        os.makedirs(folder, exist_ok=True)
        for name, array in list(self._maps.items()) + [("status", self.status)]:
            header = self._header.copy() if self._header is not None else None
            img = nib.Nifti1Image(array, affine, header=header)
            img.set_data_dtype(array.dtype)
            if header is not None:  # not the data's scaling
                img.header.set_slope_inter(1, 0)
            nib.save(img, os.path.join(folder, name + ".nii.gz"))
        with open(os.path.join(folder, "provenance.json"), "w") as f:
            json.dump(self.provenance, f, indent=2)
            f.write("\n")
        return folder


def _nibabel(what):
    try:
        import nibabel
    except ImportError:
        raise ImportError(f"{what} needs nibabel (pip install nibabel); without it, pass numpy "
                          f"arrays") from None
    return nibabel


def _is_image(x):
    return hasattr(x, "dataobj") and hasattr(x, "affine")


def _load(x, what):
    """(array, affine, header): a path or a nibabel image read, an array as it is."""
    if isinstance(x, (str, os.PathLike)):
        nib = _nibabel(f"{what} as a path")
        path = os.fspath(x)
        if not os.path.exists(path):
            raise FileNotFoundError(2, f"{what}: no such file", path)
        x = nib.load(path)
    if _is_image(x):
        return np.asanyarray(x.dataobj), np.asarray(x.affine, dtype=np.float64), x.header
    return x, None, None


def _numeric(x, what):
    """x as a numpy array of float32 or float64 (others converted, exactly where they can be)."""
    try:
        a = np.asanyarray(x)
    except Exception as e:
        raise _arg_error(f"{what}: not an array ({e})") from None
    if isinstance(a, np.ma.MaskedArray):
        a = a.filled(np.nan)
    if a.dtype.kind in "fiub" and a.dtype != np.float16:
        if a.dtype not in (np.float32, np.float64):
            a = a.astype(np.float64)
        return a
    if a.dtype == np.float16:
        return a.astype(np.float32)
    raise _arg_error(f"{what}: dtype {a.dtype} is not numeric (float32 or float64 values, or "
                     f"integers)")


def _c_array(a, dtype_code=None):
    """The dimoc_array of numpy array a (read in place)."""
    r = _native.Array()
    r.data = a.ctypes.data
    r.dtype = dtype_code if dtype_code is not None else (
        _native.FLOAT32 if a.dtype == np.float32 else _native.FLOAT64 if a.dtype == np.float64
        else _native.UINT8)
    r.ndim = a.ndim
    for k in range(a.ndim):
        r.shape[k] = a.shape[k]
        r.strides[k] = a.strides[k]
    return r


def _names(value, what):
    """A comma list or a sequence of names as a list."""
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    try:
        names = list(value)
    except TypeError:
        raise _arg_error(f"{what}: expected a name, a comma list or a list of names") from None
    if not all(isinstance(v, str) and v and "," not in v for v in names):
        raise _arg_error(f"{what}: expected names, got {names!r}")
    return names


def _check_names(names, known, what, model, kind):
    for n in names:
        if n not in known:
            raise _arg_error(f"{what}: model '{model.name}' has no {kind} '{n}' (it has: "
                             f"{', '.join(known) or 'none'})")


def integer(name, value, lo, hi):
    """value, an integer within lo..hi; else ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _arg_error(f"{name}: expected an integer, got {value!r}")
    if not lo <= int(value) <= hi:
        raise _arg_error(f"{name}: {value} is outside {lo}..{hi}")
    return int(value)


def _integer(name, value):
    return integer(name, value, *_RANGES[name])


def choice(name, value, allowed):
    """value, one of `allowed`; else ValueError naming `name`."""
    if not isinstance(value, str) or value not in allowed:
        raise _arg_error(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _methods(method):
    names = _names(method, "method")
    if not names:
        raise _arg_error("method: no method given")
    for n in names:
        if n not in METHODS:
            raise _arg_error(f"method: unknown method '{n}' ({', '.join(METHODS)})")
    if "grid" in names and "dictionary" in names:
        raise _arg_error("method: dictionary and grid both search the grid; give one of them")
    return ",".join(names)


def _grid_text(grid, model):
    """--grid's text from a mapping name -> values (a sequence, or "lo:step:hi"), or the text."""
    if isinstance(grid, str):
        items = [g for g in grid.replace(";", ",").split(",") if "=" in g]
        _check_names([g.split("=")[0] for g in items], model.parameter_names, "grid", model,
                     "parameter")
        return grid
    if not isinstance(grid, Mapping):
        raise _arg_error("grid: expected a mapping of parameter names to values")
    _check_names(list(grid), model.parameter_names, "grid", model, "parameter")
    parts = []
    for name, values in grid.items():
        if isinstance(values, str):
            text = values
        else:
            v = np.atleast_1d(np.asarray(values, dtype=np.float64))
            if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
                raise _arg_error(f"grid {name}: expected finite values, got {values!r}")
            text = ",".join(repr(float(x)) for x in v)
        parts.append(f"{name}={text}")
    return ";".join(parts)


def _in_bounds(p, v):
    above = v >= p.lower if p.lower_closed else v > p.lower
    below = v <= p.upper if p.upper_closed else v < p.upper
    return np.isfinite(v) and above and below


class _Inputs:
    """The arrays handed to the library, kept alive for the length of the call."""

    def __init__(self):
        self.keep = []

    def hold(self, x):
        self.keep.append(x)
        return x


def _map_or_value(value, what, grid, width, keep, affine):
    """A per-voxel map (X, Y, Z[, width]) or one value, as a dimoc_array."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        if width != 1:
            raise _arg_error(f"{what}: one value for an input of {width} values per voxel: give "
                             f"a map")
        a = keep.hold(np.array(float(value)))
        if not np.isfinite(a):
            raise _arg_error(f"{what}: {value} is not finite")
        return _c_array(a)
    array, map_affine, _ = _load(value, what)
    a = _numeric(array, what)
    want = grid if width == 1 else grid + (width,)
    if a.shape not in (want, grid + (1,) if width == 1 else want):
        raise _arg_error(f"{what}: shape {a.shape} is not the data's grid {want}")
    if a.ndim == 4 and width == 1:
        a = a[..., 0]
    if map_affine is not None and affine is not None and not np.allclose(map_affine, affine,
                                                                         atol=1e-4):
        raise _arg_error(f"{what}: its affine differs from the data's (another grid)")
    return _c_array(keep.hold(a))


def _named(items, keep):
    """A ctypes array of NamedArray from (name, dimoc_array) pairs."""
    arr = (_native.NamedArray * max(len(items), 1))()
    for i, (name, a) in enumerate(items):
        arr[i].name = keep.hold(name.encode())
        arr[i].array = a
    return keep.hold(arr)


def _gradients(model, M, bvals, bvecs, gtab, grad, affine, keep):
    """(bvals, bvecs, grad) arrays for the library, checked."""
    reads = {x.source for x in model.measures}
    needed = f"model '{model.name}'" if reads & {"bvals", "bvecs"} else None
    return _table(needed, M, bvals, bvecs, gtab, grad, affine, keep)


def _table(needed, M, bvals, bvecs, gtab, grad, affine, keep):
    """(bvals, bvecs, grad) arrays for the library, checked; `needed` names what reads the
    table (None: nothing needs one)."""
    if gtab is not None:
        if bvals is not None or bvecs is not None:
            raise _arg_error("gtab: given with bvals or bvecs; give one of them")
        try:
            bvals, bvecs = gtab.bvals, gtab.bvecs
        except AttributeError:
            raise _arg_error("gtab: expected a DIPY GradientTable (with .bvals and .bvecs)") \
                from None
    if grad is not None:
        if bvals is not None or bvecs is not None:
            raise _arg_error("grad: given with bvals/bvecs or gtab; give one table")
        g = _numeric(grad, "grad")
        if g.shape == (4, M) and M != 4:
            g = g.T
        if g.shape != (M, 4):
            raise _arg_error(f"grad: shape {g.shape}; expected {M} rows x y z b, one per volume")
        if not np.isfinite(g).all() or (g[:, 3] < 0).any():
            raise _arg_error("grad: not finite directions and b-values >= 0")
        if affine is None:
            raise _arg_error("grad: an affine (voxel -> world) is needed to turn the table into "
                             "the image's frame: give affine, or the data as a NIfTI image")
        return None, None, keep.hold(np.ascontiguousarray(g, dtype=np.float64))
    if bvals is None and bvecs is None:
        if needed:
            raise _arg_error(f"bvals: {needed} reads b-values and gradient directions: give "
                             f"bvals and bvecs (or gtab)")
        return None, None, None
    if bvals is None or bvecs is None:
        raise _arg_error(f"{'bvecs' if bvals is None else 'bvals'}: not given (bvals and bvecs "
                         f"go together)")
    b = _numeric(bvals, "bvals").astype(np.float64)
    if b.ndim == 2 and 1 in b.shape:
        b = b.ravel()
    if b.ndim != 1 or b.size != M:
        raise _arg_error(f"bvals: {b.size} values (shape {b.shape}) for {M} volumes")
    if not np.isfinite(b).all() or (b < 0).any():
        raise _arg_error("bvals: not finite numbers >= 0")
    g = _numeric(bvecs, "bvecs").astype(np.float64)
    if g.shape == (3, M) and M != 3:
        g = g.T
    if g.shape != (M, 3):
        raise _arg_error(f"bvecs: shape {g.shape}; expected {M} directions, (M, 3) or (3, M)")
    g = np.array(g, dtype=np.float64, order="C")
    nan = np.isnan(g).any(axis=1)
    g[nan & (b <= 50)] = 0  # "nan nan nan" for a b = 0 volume (DIPY's small_64D)
    if not np.isfinite(g).all():
        first = int(np.nonzero(~np.isfinite(g).all(axis=1))[0][0])
        raise _arg_error(f"bvecs: direction {first + 1} (b={b[first]:g}) is not finite")
    length = np.linalg.norm(g, axis=1)
    bad = (b > 0) & (np.abs(length - 1) > 0.01) & ~((length == 0) & (b <= 50))
    if bad.any():
        j = int(np.nonzero(bad)[0][0])
        raise _arg_error(f"bvecs: direction {j + 1} has length {length[j]:.4g} at b={b[j]:g}: a "
                         f"unit direction is needed where b > 0 ({int(bad.sum())} such)")
    return keep.hold(np.ascontiguousarray(b)), keep.hold(g), None


def _measures(model, M, measure, scheme, keep):
    """The model's per-measurement inputs other than bvals/bvecs, as (name, dimoc_array)."""
    wanted = {x.name: x for x in model.measures if x.source in ("file", "scheme")}
    given = {}
    if measure is not None:
        if not isinstance(measure, Mapping):
            raise _arg_error("measure: expected a mapping of the model's measure names to values")
        for name, value in measure.items():
            if name not in wanted or wanted[name].source != "file":
                raise _arg_error(f"measure: model '{model.name}' has no per-measurement input "
                                 f"'{name}' read from a file")
            given[name] = ("measure", value)
    if scheme is not None:
        if not isinstance(scheme, Mapping):
            raise _arg_error("scheme: expected a mapping of column names to values (one per "
                             "volume)")
        for x in wanted.values():
            if x.source == "scheme":
                if x.scheme_column not in scheme:
                    raise _arg_error(f"scheme: no column '{x.scheme_column}' (model "
                                     f"'{model.name}' reads measure '{x.name}' from it)")
                given[x.name] = ("scheme", scheme[x.scheme_column])
    out = []
    for name, x in wanted.items():
        if name not in given:
            how = "measure" if x.source == "file" else f"scheme (column '{x.scheme_column}')"
            raise _arg_error(f"{how.split()[0]}: model '{model.name}' needs per-measurement "
                             f"input '{name}': give it in {how}")
        what, value = given[name]
        if isinstance(value, (str, os.PathLike)):
            value = np.loadtxt(os.fspath(value), ndmin=2)
        a = _numeric(value, f"{what} {name}").astype(np.float64)
        if a.ndim == 2 and a.shape == (x.width, M) and a.shape != (M, x.width):
            a = a.T
        if a.ndim == 2 and x.width == 1 and a.shape in ((M, 1), (1, M)):
            a = a.ravel()
        if not ((a.ndim == 1 and x.width == 1 and a.size == M) or a.shape == (M, x.width)):
            raise _arg_error(f"{what} {name}: shape {a.shape}; model '{model.name}' needs "
                             f"{x.width} value{'s' * (x.width != 1)} per volume for {M} volumes")
        if not np.isfinite(a).all():
            raise _arg_error(f"{what} {name}: not finite")
        out.append((name, _c_array(keep.hold(np.ascontiguousarray(a)))))
    return out


def _mask(mask, grid, affine, keep):
    """(dimoc_array, the voxels it selects) of a mask on the data's grid, checked."""
    marray, maffine, _ = _load(mask, "mask")
    m = np.asanyarray(marray)
    if m.dtype == np.bool_:
        m = m.view(np.uint8)  # read as bytes in place
    elif m.dtype != np.uint8:
        m = _numeric(m, "mask")
    if m.shape != grid:
        raise _arg_error(f"mask: shape {m.shape} is not the data's grid {grid}")
    if maffine is not None and affine is not None and not np.allclose(maffine, affine,
                                                                      atol=1e-4):
        raise _arg_error("mask: its affine differs from the data's (another grid)")
    selected = (m != 0) & ~np.isnan(m) if m.dtype.kind == "f" else m != 0
    if not selected.any():
        raise _arg_error("mask: selects no voxel")
    return _c_array(keep.hold(m)), selected


def _all_finite(data, mask):
    """Whether every value of the voxels to fit is finite (volume by volume: no large copy)."""
    if data.dtype.kind != "f":
        return True
    for t in range(data.shape[3]):
        v = data[..., t]
        if not np.isfinite(v[mask] if mask is not None else v).all():
            return False
    return True


def _starts(model, init, init_from, grid, keep, affine):
    """--init-from's maps, then --init's values and maps, as (name, dimoc_array)."""
    params = {p.name: p for p in model.parameters}
    items = []
    if init_from is not None:
        if isinstance(init_from, (str, os.PathLike)):
            folder = os.fspath(init_from)
            maps = {}
            for name in params:
                for ext in (".nii.gz", ".nii"):
                    if os.path.exists(os.path.join(folder, name + ext)):
                        maps[name] = os.path.join(folder, name + ext)
                        break
            if not maps:
                raise _arg_error(f"init_from: no map named after a parameter of "
                                 f"'{model.name}' in {folder}")
        elif isinstance(init_from, Mapping):
            source = init_from.parameters if isinstance(init_from, FitResult) else init_from
            maps = {k: v for k, v in source.items() if k in params}
            if not maps:
                raise _arg_error(f"init_from: no map named after a parameter of '{model.name}'")
        else:
            raise _arg_error("init_from: expected a FitResult, a mapping of maps or a folder")
        for name, value in maps.items():
            items.append((name, _map_or_value(value, f"init_from {name}", grid, 1, keep,
                                              affine)))
    if init is not None:
        if not isinstance(init, Mapping):
            raise _arg_error("init: expected a mapping of parameter names to values or maps")
        _check_names(list(init), list(params), "init", model, "parameter")
        for name, value in init.items():
            if np.ndim(value) == 0 and not isinstance(value, (str, os.PathLike)) and \
                    not _is_image(value):
                try:
                    v = float(value)
                except (TypeError, ValueError):
                    raise _arg_error(f"init {name}: expected a number or a map, got "
                                     f"{value!r}") from None
                p = params[name]
                if not _in_bounds(p, v):
                    raise _arg_error(f"init {name}={v:g}: outside the bounds "
                                     f"{'[' if p.lower_closed else '('}{p.lower:g}, {p.upper:g}"
                                     f"{']' if p.upper_closed else ')'} of '{name}' in model "
                                     f"'{model.name}'")
                value = v
            items.append((name, _map_or_value(value, f"init {name}", grid, 1, keep, affine)))
    return items


def _voxel_inputs(model, voxel, grid, keep, affine):
    inputs = {x.name: x for x in model.voxel_inputs}
    voxel = {} if voxel is None else voxel
    if not isinstance(voxel, Mapping):
        raise _arg_error("voxel: expected a mapping of per-voxel input names to values or maps")
    _check_names(list(voxel), list(inputs), "voxel", model, "per-voxel input")
    for x in inputs.values():
        if x.default is None and x.name not in voxel:
            raise _arg_error(f"voxel: model '{model.name}' needs per-voxel input '{x.name}': "
                             f"give voxel={{'{x.name}': map}}")
    return [(name, _map_or_value(value, f"voxel {name}", grid, inputs[name].width, keep, affine))
            for name, value in voxel.items()]


def _options(model, method, device, opts, keep):
    """The dimoc_fit_options record, every option checked."""
    o = _native.FitOptions()
    o.size = _C.sizeof(o)
    o.method = _methods(method).encode()
    o.device = choice("device", device, ("auto", "cpu", "gpu")).encode()
    for name, value in _DEFAULTS.items():
        value = opts.get(name, value)
        if name in _RANGES:
            value = _integer(name, value)
        elif name == "noise":
            value = choice(name, value, ("gaussian", "rician")).encode()
        elif name == "precision":
            value = choice(name, value, ("float", "double", "auto")).encode()
        elif name == "out_type":
            value = np.dtype(value).name if not isinstance(value, str) else value
            value = choice(name, value, ("float32", "float64")).encode()
        elif name == "gpus":
            if not isinstance(value, str):
                value = ",".join(str(int(g)) for g in value)
            value = value.encode()
        setattr(o, name, value)
    for name in ("threads", "gpu_memory", "lanes"):
        if opts.get(name) is not None:
            setattr(o, name, _integer(name, opts[name]))
    if o.lanes & (o.lanes - 1):
        raise _arg_error(f"lanes: {o.lanes} is not a power of two")
    for name in ("save_samples", "predicted", "ic"):
        setattr(o, name, int(bool(opts.get(name, False))))
    if "fixed" in opts and opts["fixed"] is not None:
        names = _names(opts["fixed"], "fixed")
        _check_names(names, model.parameter_names, "fixed", model, "parameter")
        o.fixed = keep.hold(",".join(names).encode())
    if opts.get("grid") is not None:
        o.grid = keep.hold(_grid_text(opts["grid"], model).encode())
    if "grid" in o.method.decode().split(",") and not o.grid:
        raise _arg_error("grid: method grid needs a grid (grid={'name': values})")
    if "dictionary" in o.method.decode().split(",") and not o.grid:
        raise _arg_error("grid: method dictionary needs a grid of the model's non-linear "
                         "parameters (the fractions are solved for)")
    if opts.get("dictionary_penalty") is not None:
        dp = opts["dictionary_penalty"]
        if not isinstance(dp, str):
            try:
                l1, l2 = (float(v) for v in dp)
            except (TypeError, ValueError):
                raise _arg_error("dictionary_penalty: expected (L1, L2), two numbers >= 0") \
                    from None
            dp = f"{l1!r},{l2!r}"
        o.dictionary_penalty = keep.hold(dp.encode())
    if opts.get("part") is not None:
        part = opts["part"]
        if not isinstance(part, str):
            part = "/".join(str(int(v)) for v in part)
        o.part = keep.hold(part.encode())
    if o.jumps // o.sample_every < 1 and "mcmc" in o.method.decode():
        raise _arg_error(f"jumps: {o.jumps} with sample_every {o.sample_every} keeps no sample")
    return o


def fit(model, data, bvals=None, bvecs=None, mask=None, gtab=None, method="lm", device="auto",
        **options):
    """Fits `model` voxel by voxel, as `dimoc fit` does; returns a FitResult (a mapping of each
    parameter and output to its map on the data's grid, with .status and .provenance).

    model: a dimoc.Model, or what Model() takes (a shipped name, a .model path, source text).
    data: a 4-D array (X, Y, Z, volumes) of numbers, a nibabel image or a path to one.
    bvals, bvecs: the b-values (s/mm^2) and unit directions (FSL's bvecs frame, (M, 3) or
    (3, M)), or gtab, a DIPY GradientTable; or grad, MRtrix's table (M rows x y z b, world
    frame) with affine (from the data when it is an image).
    mask: (X, Y, Z): fit the voxels where it is non-zero (default: every voxel).
    method: "lm", "grid,lm", "lm,mcmc", ["grid", "lm"], ...; device: "auto", "cpu", "gpu".

    Every option of `dimoc fit` is a keyword of the same name, dashes as underscores:
    dictionary_penalty, grid ({name: values or "lo:step:hi"}), fixed (names), init ({name:
    value or map}), init_from (a FitResult, a mapping of maps or a folder: --init-from, and the
    way to run a cascade), voxel ({name: value or map}), measure ({name: values or file}),
    scheme ({column: values}), noise, burnin, jumps, sample_every, update_every, seed,
    lm_iterations, save_samples, predicted, ic, out_type, precision, threads, gpus, gpu_memory,
    lanes, part, quiet.  And: progress (None: a tqdm bar when tqdm is installed, False: none, or
    a callable(stage, fraction)), cancel (a threading.Event: set, the fit stops and
    FitCancelled is raised).

    Raises ValueError (a TypeError too) naming the argument for anything wrong with the inputs
    or options, before any work; KeyboardInterrupt on Ctrl-C, with the fit stopped."""
    from . import Model
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        hint = " (a cascade: fit again with init_from=the result)" if "then" in unknown else ""
        raise _arg_error(f"fit: unknown option{'s' * (len(unknown) > 1)} "
                         f"{', '.join(map(repr, unknown))}{hint}; the options are "
                         f"{', '.join(OPTIONS)}")
    if not isinstance(model, Model):
        model = Model(model)
    keep = _Inputs()
    array, affine, header = _load(data, "data")
    data = _numeric(array, "data")
    if data.ndim != 4:
        raise _arg_error(f"data: expected 4 dimensions (X, Y, Z, volumes), got shape "
                         f"{data.shape}")
    if min(data.shape) < 1 or data.shape[3] < 2:
        raise _arg_error(f"data: shape {data.shape}: a fit needs voxels and one volume per "
                         f"measurement (at least 2)")
    grid, M = tuple(data.shape[:3]), data.shape[3]
    if options.get("affine") is not None:
        a = np.asarray(options["affine"], dtype=np.float64)
        if a.shape != (4, 4) or not np.isfinite(a).all():
            raise _arg_error(f"affine: expected a finite 4x4 matrix, got shape {a.shape}")
        affine = a
    inp = _native.FitInput()
    inp.size = _C.sizeof(inp)
    inp.data = _c_array(keep.hold(data))
    mask_bool = None
    if mask is not None:
        inp.mask, mask_bool = _mask(mask, grid, affine, keep)
    if not _all_finite(data, mask_bool):
        raise _arg_error("data: NaN or infinite values" + (" inside the mask" if mask is not None
                                                             else "") +
                         " (fit only the voxels of a mask that leaves them out)")
    b, g, grad = _gradients(model, M, bvals, bvecs, gtab, options.get("grad"), affine, keep)
    dp = _C.POINTER(_C.c_double)
    if b is not None:
        inp.bvals, inp.bvecs = b.ctypes.data_as(dp), g.ctypes.data_as(dp)
    if grad is not None:
        inp.grad = grad.ctypes.data_as(dp)
        inp.affine = keep.hold(np.ascontiguousarray(affine)).ctypes.data_as(dp)
    measures = _measures(model, M, options.get("measure"), options.get("scheme"), keep)
    inp.nmeasures, inp.measures = len(measures), _named(measures, keep)
    voxel = _voxel_inputs(model, options.get("voxel"), grid, keep, affine)
    inp.nvoxel_inputs, inp.voxel_inputs = len(voxel), _named(voxel, keep)
    opts = _options(model, method, device, options, keep)
    starts = _starts(model, options.get("init"), options.get("init_from"), grid, keep, affine)
    opts.ninit, opts.init = len(starts), _named(starts, keep)
    fixed = set(opts.fixed.decode().split(",")) if opts.fixed else set()
    nfree = sum(p.name not in fixed for p in model.parameters)
    if M < nfree:
        raise _arg_error(f"data: {M} volumes but model '{model.name}' has {nfree} free "
                         f"parameters: a fit needs at least one measurement per free parameter")
    cancel = check_cancel(options.get("cancel"))
    report = reporter(options.get("progress"), bool(options.get("quiet", False)), "dimoc.fit")

    def call(ctx, handle):
        return _lib.dimoc_fit(model._handle, _C.byref(inp), _C.byref(opts), _C.byref(ctx),
                              _C.byref(handle))

    keep.keep.append(model)  # the model lives as long as the call
    handle = run(call, _lib.dimoc_fit_result_free, report, cancel, keep.keep, "dimoc.fit",
                 FitCancelled)
    return _result(handle, grid, affine, header)


_DTYPES = {_native.FLOAT32: np.float32, _native.FLOAT64: np.float64, _native.UINT8: np.uint8}


def _result(handle, grid, affine, header):
    """The FitResult of a result handle: its maps as arrays over the library's memory (no
    copy), which is freed with the last of them."""
    owner = Owner(handle, _lib.dimoc_fit_result_free)
    maps_p = _C.POINTER(_C.POINTER(_native.FitMap))()
    n = _lib.dimoc_fit_result_maps(handle, _C.byref(maps_p))
    maps, kinds, status = {}, {}, None
    for i in range(n):
        m = maps_p[i].contents
        dtype = np.dtype(_DTYPES[m.dtype])
        shape = tuple(grid) + ((m.volumes,) if m.volumes > 1 or m.kind in (b"samples",
                                                                          b"predicted")
                               else ())
        count = int(np.prod(shape))
        buf = (_C.c_char * (count * dtype.itemsize)).from_address(m.data)
        buf._owner = owner
        array = np.frombuffer(buf, dtype=dtype, count=count).reshape(shape, order="F")
        name, kind = _native.text(m.name), _native.text(m.kind)
        if kind == "status":
            status = array
        else:
            maps[name], kinds[name] = array, kind
    provenance = json.loads(_native.text(_lib.dimoc_fit_result_provenance(handle)))
    lines_p = _C.POINTER(_C.c_char_p)()
    nw = _lib.dimoc_fit_result_warnings(handle, _C.byref(lines_p))
    lines = [_native.text(lines_p[i]) for i in range(nw)]
    for line in lines:
        warnings.warn(line, DimocWarning, stacklevel=3)
    return FitResult(maps, kinds, status, provenance, lines, affine, header)
