"""dimoc from Python: the diffusion-MRI model compiler through its C library (libdimoc.so).

    import dimoc
    m = dimoc.Model("noddi_watson")        # a shipped model, a .model path, or source text
    [p.name for p in m.parameters]
    dimoc.models()                         # the shipped models' names

    r = dimoc.fit("ball_1_stick", data, bvals, bvecs, mask=mask)   # numpy arrays in and out
    r["d"], r.status, r.provenance

A model with mistakes raises dimoc.ModelError, whose .diagnostics hold each mistake's line,
column and message.  docs/api.md says what is here and what comes next (simulating, tensors,
CSD, tracking and COMMIT on arrays)."""
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from . import _native
from ._native import lib as _lib

__all__ = ["Model", "ModelError", "DimocError", "Diagnostic", "Parameter", "Input", "Output",
           "Generated", "models", "data_dir", "set_data_dir", "api_version", "__version__",
           "fit", "FitResult", "FitCancelled", "DimocWarning",
           "simulate", "Simulation", "Cancelled", "Result", "dti",
           "response", "csd", "peaks", "Responses",
           "track", "tdi", "connectome", "Streamlines", "commit"]

__version__ = _native.text(_lib.dimoc_version())
#: The C API's version of the library loaded: (major, minor).
api_version = divmod(_lib.dimoc_api_version(), 1000)


class DimocError(Exception):
    """A failure of the library: .code is the name of its status ("DIMOC_E_LIMIT")."""

    def __init__(self, message, code="DIMOC_E_INTERNAL"):
        super().__init__(message)
        self.code = code


class _ArgumentError(ValueError, TypeError):
    """A wrong argument: a ValueError (as documented) that `except TypeError` catches too."""


@dataclass(frozen=True)
class Diagnostic:
    """One of a model's diagnostics, as `dimoc check` reports it."""
    file: str
    line: int          # 1-based; 0 for a message about the file as a whole
    column: int        # 1-based, in bytes of the line
    severity: str      # "error", "warning" or "note" (a note explains the diagnostic before it)
    message: str
    text: str          # as dimoc check prints it: the header line, the source line, a caret

    def __str__(self):
        return self.text.rstrip("\n")


class ModelError(DimocError):
    """A model with errors.  .diagnostics lists them (Diagnostic: .line, .column, .message),
    warnings and notes among them; str() is what `dimoc check` prints for the model."""

    def __init__(self, file, diagnostics, errors, warnings):
        self.file = file
        self.diagnostics = list(diagnostics)
        self.errors, self.warnings = errors, warnings
        count = (f"{file}: {errors} error{'' if errors == 1 else 's'}, "
                 f"{warnings} warning{'' if warnings == 1 else 's'}")
        super().__init__("".join(d.text for d in self.diagnostics) + count, "DIMOC_E_MODEL")


@dataclass(frozen=True)
class Parameter:
    """A parameter of a model, with its bounds, start and prior (the model language has no
    units: a parameter is in whatever units its model's signal uses)."""
    name: str
    lower: float
    upper: float
    lower_closed: bool
    upper_closed: bool
    init: float
    start: str                  # "" for the constant init, else "b0", "md", "theta(1)", ...
    prior: str                  # "none", "uniform", "sphere", "ard", "gaussian", ...
    prior_args: Tuple[float, ...]
    step: float                 # MCMC's starting proposal width; 0: chosen by the fitter
    periodic: bool

    @property
    def bounds(self):
        return (self.lower, self.upper)


@dataclass(frozen=True)
class Input:
    """A per-measurement input (Model.measures) or a per-voxel one (Model.voxel_inputs)."""
    name: str
    width: int
    column: int
    source: str                 # "bvals", "bvecs", "scheme", "file"; "map" for voxel inputs
    scheme_column: str
    default: Optional[float]    # voxel inputs: the value taken when no map is given


@dataclass(frozen=True)
class Output:
    """A derived output of a model (every fit also writes one map per parameter)."""
    name: str
    kind: str                   # "scalar", "vector" or "axis"
    width: int
    column: int


@dataclass(frozen=True)
class Generated:
    """The code the compiler makes of a model, as `dimoc compile` writes it."""
    model_h: str
    meta: str


def _require(name, value, types, what):
    if not isinstance(value, types):
        raise _ArgumentError(f"{name}: expected {what}, got {type(value).__name__}")


def _diagnostics(handle):
    records = _native.ctypes.POINTER(_native.ctypes.POINTER(_native.Error))()
    n = _lib.dimoc_model_diagnostics(handle, _native.ctypes.byref(records))
    out = []
    for i in range(n):
        r = records[i].contents
        out.append(Diagnostic(_native.text(r.file), r.line, r.column,
                              _native.SEVERITIES[r.severity], _native.text(r.message),
                              _native.text(r.text)))
    return out


def _raise_last(argument):
    """Raises the library's last failure as the Python exception that fits it."""
    e = _native.last_error()
    message = _native.text(e.message)
    code = _native.text(_lib.dimoc_status_name(e.code))
    if e.code == _native.E_IO:
        path = _native.text(e.file)
        err = FileNotFoundError if path and not os.path.exists(path) else OSError
        raise err(2 if err is FileNotFoundError else 5, message, path)
    if e.code in (_native.E_ARGUMENT, _native.E_NOT_FOUND):
        raise _ArgumentError(f"{argument}: {message}")
    if e.code == _native.E_MEMORY:
        raise MemoryError(message)
    raise DimocError(message, code)


class Model:
    """A model checked by dimoc's compiler.

    spec: a shipped model's name ("noddi_watson"), a path to a .model file (a str holding a '/'
    or ending in .model, or any os.PathLike), or the model's source text (a str holding a
    newline).  With file_name, spec is source text whatever it holds, file_name names it in
    diagnostics and its imports are looked for in file_name's folder (without: "<string>", and
    the working folder).

    Raises ModelError for a model with errors, FileNotFoundError for a missing file, ValueError
    for an unknown name or an argument of the wrong type."""

    def __init__(self, spec, *, file_name=None):
        self._handle = None
        if isinstance(spec, os.PathLike):
            spec = os.fspath(spec)
            _require("spec", spec, str, "a str or os.PathLike of str")
            opener = lambda h: _lib.dimoc_model_open_file(os.fsencode(spec), h)  # noqa: E731
        else:
            _require("spec", spec, str, "a shipped model's name, a .model path or model source "
                     "text (str or os.PathLike)")
            if file_name is not None:
                _require("file_name", file_name, (str, os.PathLike), "a str or os.PathLike")
                name = os.fsencode(file_name)
                opener = lambda h: _lib.dimoc_model_open_source(spec.encode(), name, h)  # noqa
            else:
                opener = lambda h: _lib.dimoc_model_open(spec.encode(), h)  # noqa: E731
        if "\0" in spec:
            raise _ArgumentError("spec: holds a NUL character (no model, name or path does)")
        handle = _native.ctypes.c_void_p()
        status = opener(_native.ctypes.byref(handle))
        if status == _native.E_MODEL and handle:
            diagnostics = _diagnostics(handle)
            errors, warnings = _native.c_int(), _native.c_int()
            _lib.dimoc_model_problems(handle, _native.ctypes.byref(errors),
                                      _native.ctypes.byref(warnings))
            file = _native.text(_native.last_error().file)
            _lib.dimoc_model_free(handle)
            raise ModelError(file, diagnostics, errors.value, warnings.value)
        if status != _native.OK:
            _raise_last("spec")
        self._handle = handle
        #: the model's warnings (a clean model may have some), as Diagnostic
        self.warnings = tuple(_diagnostics(handle))
        d = _lib.dimoc_model_describe(handle)
        if not d:
            _raise_last("spec")
        self._describe(d.contents)

    def _describe(self, d):
        t = _native.text
        self.name, self.description, self.file = t(d.name), t(d.description), t(d.file)
        self.source_hash, self.code_hash = t(d.source_hash), t(d.code_hash)
        self.multistart = d.multistart

        def prior_args(p):
            n = {"ard": 1, "gaussian": 2, "gamma": 2}.get(t(p.prior), 0)
            return (p.prior_a, p.prior_b)[:n]

        self.parameters = tuple(
            Parameter(t(p.name), p.lower, p.upper, bool(p.lower_closed), bool(p.upper_closed),
                      p.init, t(p.start), t(p.prior), prior_args(p), p.step, bool(p.periodic))
            for p in (d.parameters[i].contents for i in range(d.nparameters)))
        self.measures = tuple(
            Input(t(x.name), x.width, x.column, t(x.source), t(x.scheme_column), None)
            for x in (d.measures[i].contents for i in range(d.nmeasures)))
        self.voxel_inputs = tuple(
            Input(t(x.name), x.width, x.column, t(x.source), t(x.scheme_column),
                  x.default_value if x.has_default else None)
            for x in (d.voxel_inputs[i].contents for i in range(d.nvoxel_inputs)))
        self.outputs = tuple(Output(t(o.name), t(o.kind_name), o.width, o.column)
                             for o in (d.outputs[i].contents for i in range(d.noutputs)))
        w = d.work
        #: operations of one evaluation, as `dimoc info` counts them
        self.work = {k: getattr(w, k) for k, _ in _native.Work._fields_}

    @property
    def parameter_names(self):
        return [p.name for p in self.parameters]

    @property
    def summary(self):
        """What `dimoc check` prints of the model."""
        return _native.take_text(_lib.dimoc_model_summary(self._handle))

    def generate(self):
        """The generated code as `dimoc compile` writes it: Generated(model_h, meta)."""
        h, meta = _native.ctypes.c_void_p(), _native.ctypes.c_void_p()
        if _lib.dimoc_model_generate(self._handle, _native.ctypes.byref(h),
                                     _native.ctypes.byref(meta)) != _native.OK:
            _raise_last("model")
        return Generated(_native.take_text(h), _native.take_text(meta))

    def __repr__(self):
        n, k = len(self.parameters), len(self.outputs)
        return (f"<dimoc.Model {self.name}: {n} parameter{'s' * (n != 1)}, "
                f"{k} output{'s' * (k != 1)}, from {self.file}>")

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.dimoc_model_free(self._handle)
            self._handle = None


def models():
    """The names of the shipped models, sorted."""
    names = _native.ctypes.POINTER(_native.ctypes.c_char_p)()
    count = _native.c_int()
    if _lib.dimoc_shipped_models(_native.ctypes.byref(names), _native.ctypes.byref(count)):
        _raise_last("models")
    try:
        return [_native.text(names[i]) for i in range(count.value)]
    finally:
        _lib.dimoc_free_list(names)


def data_dir():
    """The folder the shipped models and templates are read from (None when none is found)."""
    return _native.take_text(_lib.dimoc_data_dir())


def set_data_dir(path):
    """Reads shipped data from `path` before anywhere else (None: back to the usual places)."""
    if path is not None:
        _require("path", path, (str, os.PathLike), "a str, os.PathLike or None")
        path = os.fspath(path)
        _require("path", path, str, "a str path")
    if _lib.dimoc_set_data_dir(None if path is None else path.encode()) != _native.OK:
        _raise_last("path")


_FIT_NAMES = ("fit", "FitResult", "FitCancelled", "DimocWarning")
# The calls on arrays of API 1.2, by the module that holds each
_ARRAY_NAMES = {"simulate": "_simulate", "Simulation": "_simulate", "Cancelled": "_call",
                "Result": "_call"}
_ARRAY_NAMES.update(dti="_dti")
_ARRAY_NAMES.update(response="_csd", csd="_csd", peaks="_csd", Responses="_csd")
_ARRAY_NAMES.update(track="_track", tdi="_track", connectome="_track", Streamlines="_track",
                    commit="_commit")


def __getattr__(name):
    """dimoc.fit, the other calls on arrays and their classes, imported at their first use: they
    need numpy, the models do not."""
    if name in _FIT_NAMES or name in _ARRAY_NAMES:
        import importlib
        module = "._fit" if name in _FIT_NAMES else "." + _ARRAY_NAMES[name]
        try:
            return getattr(importlib.import_module(module, __name__), name)
        except ImportError as e:
            raise ImportError(f"dimoc.{name} needs numpy (pip install numpy): {e}") from None
    raise AttributeError(f"module 'dimoc' has no attribute {name!r}")
