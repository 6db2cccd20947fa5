"""What the calls on arrays share (dimoc.fit, dimoc.simulate, dimoc.dti, ...): the C call on a
thread of its own with progress and cancel, so that Ctrl-C raises KeyboardInterrupt at once;
the library's failures as Python exceptions; the arrays of a result (include/dimoc.h's
dimoc_result) as numpy arrays over the library's memory, and the result's mapping."""
import json
import os
import threading
import warnings
from collections.abc import Mapping

import numpy as np

from . import _native
from ._native import lib as _lib

_C = _native.ctypes
_DTYPES = {_native.FLOAT32: np.float32, _native.FLOAT64: np.float64, _native.UINT8: np.uint8,
           _native.UINT32: np.uint32, _native.UINT64: np.uint64}


class Cancelled(Exception):
    """A call stopped by its `cancel` event (Ctrl-C raises KeyboardInterrupt instead)."""


class DimocWarning(UserWarning):
    """A warning of the library, as the command prints it."""


def arg_error(message):
    from . import _ArgumentError
    return _ArgumentError(message)


class _Bar:
    """A tqdm bar over the stages: percent of the current stage, the stage as description."""

    def __init__(self, tqdm, name):
        self.name = name
        self.bar = tqdm(total=100, unit="%", leave=False, desc=name,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")
        self.stage = None

    def __call__(self, stage, fraction):
        if stage != self.stage:
            self.stage = stage
            self.bar.set_description(f"{self.name} {stage}", refresh=False)
        self.bar.n = round(100 * fraction, 1)
        self.bar.refresh()

    def close(self):
        self.bar.close()


def reporter(progress, quiet, name):
    """What reports progress: None (quiet, progress False, or no tqdm), the caller's callable,
    or a tqdm bar; ValueError for anything else."""
    if progress is not None and progress is not False and progress is not True and \
            not callable(progress):
        raise arg_error("progress: expected None, True, False or a callable(stage, fraction)")
    if quiet or progress is False:
        return None
    if callable(progress) and progress is not True:
        return progress
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return _Bar(tqdm, name)


def check_cancel(cancel):
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise arg_error("cancel: expected a threading.Event (or anything with is_set())")
    return cancel


def error(status):
    """The library's last error (of the thread that called it) as the exception that fits."""
    e = _native.last_error()
    message = _native.text(e.message)
    if status == _native.E_ARGUMENT or status == _native.E_NOT_FOUND:
        return arg_error(message)
    if status == _native.E_MEMORY:
        return MemoryError(message)
    from . import DimocError
    return DimocError(message, _native.text(_lib.dimoc_status_name(status)))


def run(call, free, report, cancel, keep, name, cancelled=Cancelled):
    """call(context, handle_ref) -> status (the library's call) on a thread of its own (the GIL
    released), this thread waiting so that Ctrl-C reaches it; the result's handle.  On Ctrl-C
    the call is asked to stop and waited for (about a second at most: the library polls between
    pieces of work) and KeyboardInterrupt raised; a call that does not stop by then (a model's
    first compile) ends on its thread, which frees (free(handle)) what it made.  A call stopped
    by `cancel` raises `cancelled`; a failure, its exception.  keep: the arrays the call reads,
    held until it ends."""
    stop = threading.Event()
    done = threading.Event()
    lock = threading.Lock()
    box = {"abandoned": False, "status": None, "handle": None, "error": None}

    def on_progress(user, stage, fraction):
        try:
            if report is not None:
                report(stage.decode() if stage else "", fraction)
        except Exception as e:  # never into the library
            box["progress_error"] = e

    def on_cancel(user):
        try:
            return int(stop.is_set() or (cancel is not None and bool(cancel.is_set())))
        except Exception:
            return 1

    ctx = _native.Context()
    ctx.size = _C.sizeof(ctx)
    ctx.progress = _native.PROGRESS(on_progress)
    ctx.cancel = _native.CANCEL(on_cancel)

    def work():
        handle = _C.c_void_p()
        status, err = None, None
        try:
            status = call(ctx, handle)
            if status != _native.OK:
                err = error(status)
        except BaseException as e:
            err = e
        with lock:
            if box["abandoned"]:
                if handle:
                    free(handle)
            else:
                box.update(status=status, handle=handle, error=err)
            done.set()
        # the arrays and the callbacks live until here (keep, ctx)
        del keep[:]

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    interrupted = False
    try:
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        done.wait(1.0)
        with lock:
            if not done.is_set():
                box["abandoned"] = True
                raise
    finally:
        if isinstance(report, _Bar):
            report.close()
    if interrupted:
        if box["handle"]:  # done just before the stop arrived: Ctrl-C all the same
            free(box["handle"])
        raise KeyboardInterrupt
    if box["status"] == _native.E_CANCELLED:
        raise cancelled(f"{name}: cancelled")
    if box["error"] is not None:
        raise box["error"]
    return box["handle"]


class Owner:
    """Frees a result once no array of it is left."""

    def __init__(self, handle, free):
        self.handle, self.free = handle, free

    def __del__(self):
        if self.handle:
            self.free(self.handle)
            self.handle = None


def array_over(record, owner):
    """The numpy array of a dimoc_array the library owns (no copy), which keeps `owner` (and so
    the library's memory) alive."""
    dtype = np.dtype(_DTYPES[record.dtype])
    shape = tuple(record.shape[k] for k in range(record.ndim))
    strides = tuple(record.strides[k] for k in range(record.ndim))
    if any(s < 0 for s in strides):
        raise ValueError("a result array with negative strides")
    size = dtype.itemsize + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    buf = (_C.c_char * max(size, 1)).from_address(record.data)
    buf._owner = owner
    return np.ndarray(shape, dtype=dtype, buffer=buf, strides=strides)


def warnings_of(lines, stacklevel=4):
    for line in lines:
        warnings.warn(line, DimocWarning, stacklevel=stacklevel)


def take_result(handle):
    """(arrays by name, kinds by name, provenance as a dict or None, warnings) of a dimoc_result
    handle; its arrays over the library's memory, freed with the last of them."""
    owner = Owner(handle, _lib.dimoc_result_free)
    records = _C.POINTER(_C.POINTER(_native.ResultArray))()
    n = _lib.dimoc_result_arrays(handle, _C.byref(records))
    arrays, kinds = {}, {}
    for i in range(n):
        r = records[i].contents
        name = _native.text(r.name)
        arrays[name] = array_over(r.array, owner)
        kinds[name] = _native.text(r.kind)
    prov = _lib.dimoc_result_provenance(handle)
    provenance = json.loads(_native.text(prov)) if prov else None
    lines_p = _C.POINTER(_C.c_char_p)()
    nw = _lib.dimoc_result_warnings(handle, _C.byref(lines_p))
    lines = [_native.text(lines_p[i]) for i in range(nw)]
    return arrays, kinds, provenance, lines


def nibabel(what):
    try:
        import nibabel
    except ImportError:
        raise ImportError(f"{what} needs nibabel (pip install nibabel); without it, pass numpy "
                          f"arrays") from None
    return nibabel


def check_affine(affine):
    affine = np.asarray(affine, dtype=np.float64)
    if affine.shape != (4, 4) or not np.isfinite(affine).all():
        raise arg_error(f"affine: expected a finite 4x4 matrix, got shape {affine.shape}")
    return affine


def save_nifti(path, array, affine, header=None):
    """array as a NIfTI image of its own dtype (not the data's scaling) with affine."""
    nib = nibabel("to_nifti")
    header = header.copy() if header is not None else None
    img = nib.Nifti1Image(array, affine, header=header)
    img.set_data_dtype(array.dtype)
    if header is not None:
        img.header.set_slope_inter(1, 0)
    nib.save(img, path)


class Result(Mapping):
    """The arrays of a call, by the names of the files the command writes (FA, wm_fod, ...):
    numpy arrays over the library's memory (no copy), maps on the data's grid (X, Y, Z) or
    (X, Y, Z, k).  .kind(name) says what each is; .provenance (a dict, or None), .warnings;
    .to_nifti(folder) writes the maps as the command does (needs nibabel)."""

    def __init__(self, arrays, kinds, provenance, warnings_, affine=None, header=None,
                 label="dimoc.Result"):
        self._arrays, self._kinds = arrays, kinds
        self.provenance, self.warnings = provenance, warnings_
        self._affine, self._header, self._label = affine, header, label

    def __getitem__(self, name):
        return self._arrays[name]

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self):
        return len(self._arrays)

    def kind(self, name):
        return self._kinds[name]

    @property
    def affine(self):
        """The voxel -> world matrix of the data's grid (None when the data came as an array
        without one)."""
        return self._affine

    def __repr__(self):
        return f"<{self._label}: {', '.join(f'{k} {v.shape}' for k, v in self._arrays.items())}>"

    def maps(self):
        """The arrays on the data's grid, by name."""
        return {k: v for k, v in self._arrays.items() if self._kinds[k] in MAP_KINDS}

    def to_nifti(self, folder, affine=None):
        """Writes every map as FOLDER/NAME.nii.gz (with the data's affine, or `affine`) and
        provenance.json; returns the folder."""
        if affine is None:
            affine = self._affine
        if affine is None:
            raise arg_error("affine: the data came as an array: give the affine (4x4) of its "
                            "grid")
        affine = check_affine(affine)
        os.makedirs(folder, exist_ok=True)
        for name, array in self.maps().items():
            save_nifti(os.path.join(folder, name + ".nii.gz"), array, affine, self._header)
        if self.provenance is not None:
            with open(os.path.join(folder, "provenance.json"), "w") as f:
                json.dump(self.provenance, f, indent=2)
                f.write("\n")
        return folder


# The kinds of dimoc_result_array that are maps on the data's grid.
MAP_KINDS = ("map", "mask", "status", "fod", "voxels")
