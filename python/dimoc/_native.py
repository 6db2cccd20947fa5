"""The ctypes binding of libdimoc.so (include/dimoc.h): the library found, its records as
ctypes structures, its functions declared.  dimoc/__init__.py is the Python face over it."""
import ctypes
import os

# The API this binding was written for: the library's major version must be this one, and its
# minor version at least this one (include/dimoc.h, docs/api.md: "Versions").
API_MAJOR = 1
API_MINOR = 2
SONAME = f"libdimoc.so.{API_MAJOR}"

c_char_p, c_int, c_long, c_double = ctypes.c_char_p, ctypes.c_int, ctypes.c_long, ctypes.c_double


def _library_path():
    """$DIMOC_LIBRARY, else the package's own lib/ (a wheel, pip install), else a source tree's
    build/ (the package imported from python/ of a built checkout)."""
    env = os.environ.get("DIMOC_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "lib", SONAME),
                  os.path.join(here, "..", "..", "build", SONAME)]
    for path in candidates:
        if os.path.exists(path):
            return os.path.normpath(path)
    raise ImportError(f"dimoc: {SONAME} is not in {candidates[0]} (install the package with pip, "
                      f"or run 'make lib' in a source tree, or set DIMOC_LIBRARY)")


class Error(ctypes.Structure):
    _fields_ = [("code", c_int), ("severity", c_int), ("message", c_char_p), ("file", c_char_p),
                ("line", c_int), ("column", c_int), ("text", c_char_p)]


class Parameter(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("lower", c_double), ("upper", c_double),
                ("lower_closed", c_int), ("upper_closed", c_int), ("init", c_double),
                ("start", c_char_p), ("prior", c_char_p), ("prior_a", c_double),
                ("prior_b", c_double), ("step", c_double), ("periodic", c_int)]


class Input(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("width", c_int), ("column", c_int), ("source", c_char_p),
                ("scheme_column", c_char_p), ("has_default", c_int),
                ("default_value", c_double)]


class Output(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_int), ("kind_name", c_char_p), ("width", c_int),
                ("column", c_int)]


class Work(ctypes.Structure):
    _fields_ = [("signal", c_long), ("signal_transcendental", c_long), ("gradient", c_long),
                ("gradient_transcendental", c_long), ("prepare", c_long),
                ("gradient_prepare", c_long)]


class Description(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("description", c_char_p), ("file", c_char_p),
                ("source_hash", c_char_p), ("code_hash", c_char_p), ("multistart", c_int),
                ("nparameters", c_int), ("parameters", ctypes.POINTER(ctypes.POINTER(Parameter))),
                ("nmeasures", c_int), ("measures", ctypes.POINTER(ctypes.POINTER(Input))),
                ("nvoxel_inputs", c_int), ("voxel_inputs", ctypes.POINTER(ctypes.POINTER(Input))),
                ("noutputs", c_int), ("outputs", ctypes.POINTER(ctypes.POINTER(Output))),
                ("measure_width", c_int), ("voxel_width", c_int), ("output_width", c_int),
                ("work", Work)]


# Fits on arrays (API 1.1): dimoc_array, dimoc_fit_input, dimoc_fit_options, dimoc_context,
# dimoc_fit_map.
FLOAT32, FLOAT64, UINT8 = range(3)
UINT32, UINT64 = 3, 4  # API 1.2: track-density counts, streamlines' offsets


class Array(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", c_int), ("ndim", c_int),
                ("shape", ctypes.c_size_t * 4), ("strides", ctypes.c_ssize_t * 4)]


class NamedArray(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("array", Array)]


_DOUBLES = ctypes.POINTER(c_double)


class FitInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("data", Array), ("mask", Array), ("bvals", _DOUBLES),
                ("bvecs", _DOUBLES), ("grad", _DOUBLES), ("affine", _DOUBLES),
                ("nmeasures", c_int), ("measures", ctypes.POINTER(NamedArray)),
                ("nvoxel_inputs", c_int), ("voxel_inputs", ctypes.POINTER(NamedArray))]


class FitOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("method", c_char_p), ("grid", c_char_p),
                ("fixed", c_char_p), ("ninit", c_int), ("init", ctypes.POINTER(NamedArray)),
                ("dictionary_penalty", c_char_p), ("noise", c_char_p), ("burnin", c_long),
                ("jumps", c_long), ("sample_every", c_long), ("update_every", c_long),
                ("lm_iterations", c_long), ("seed", ctypes.c_ulonglong), ("save_samples", c_int),
                ("predicted", c_int), ("ic", c_int), ("out_type", c_char_p),
                ("precision", c_char_p), ("threads", c_int), ("device", c_char_p),
                ("gpus", c_char_p), ("gpu_memory", c_long), ("lanes", c_int), ("part", c_char_p)]


PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_char_p, c_double)
CANCEL = ctypes.CFUNCTYPE(c_int, ctypes.c_void_p)


class Context(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("progress", PROGRESS), ("cancel", CANCEL),
                ("user", ctypes.c_void_p)]


class FitMap(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_char_p), ("volumes", c_int), ("dtype", c_int),
                ("data", ctypes.c_void_p), ("shape", ctypes.c_size_t * 4)]


# Results as named arrays and simulating on arrays (API 1.2): dimoc_result_array,
# dimoc_simulate_input, dimoc_simulate_options.
class ResultArray(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_char_p), ("array", Array)]


class SimulateInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("nparams", c_int),
                ("params", ctypes.POINTER(NamedArray)), ("nvoxel_inputs", c_int),
                ("voxel_inputs", ctypes.POINTER(NamedArray)), ("mask", Array), ("volumes", c_int),
                ("bvals", _DOUBLES), ("bvecs", _DOUBLES), ("nmeasures", c_int),
                ("measures", ctypes.POINTER(NamedArray))]


class SimulateOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("noise", c_char_p), ("snr", c_double),
                ("seed", ctypes.c_ulonglong), ("voxels", c_long), ("out_type", c_char_p),
                ("threads", c_int)]


# Diffusion-weighted data on arrays (API 1.2): dimoc_dwi_input and the options of dimoc_dti.
class DwiInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("data", Array), ("mask", Array), ("bvals", _DOUBLES),
                ("bvecs", _DOUBLES), ("grad", _DOUBLES), ("affine", _DOUBLES)]


class DtiOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("method", c_char_p), ("iter", c_int),
                ("min_signal", c_double), ("min_diffusivity", c_char_p), ("save_tensor", c_int),
                ("sse", c_int), ("out_type", c_char_p), ("threads", c_int)]


# Response functions, CSD and peaks on arrays (API 1.2): the options of dimoc_response,
# dimoc_tissue_response, the options of dimoc_csd, the input and options of dimoc_peaks.
class ResponseOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("algorithm", c_char_p), ("lmax", c_int),
                ("threads", c_int)]


class TissueResponse(ctypes.Structure):
    _fields_ = [("shells", c_int), ("coefficients", c_int), ("values", _DOUBLES),
                ("bvals", _DOUBLES)]


class CsdOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("nresponses", c_int),
                ("responses", ctypes.POINTER(TissueResponse)), ("algorithm", c_char_p),
                ("msmt", c_int), ("lmax", c_int), ("ndirections", c_int),
                ("directions", _DOUBLES), ("normalise", c_int), ("device", c_char_p),
                ("gpus", c_char_p), ("precision", c_char_p), ("threads", c_int),
                ("max_iter", c_int), ("part", c_char_p), ("out_type", c_char_p)]


class PeaksInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("fod", Array), ("mask", Array), ("affine", _DOUBLES)]


class PeaksOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("num", c_int), ("threshold", c_double),
                ("relative", c_double), ("out_type", c_char_p), ("threads", c_int)]


# Tractography and what follows it on arrays (API 1.2): dimoc_image, dimoc_streamlines and the
# records of dimoc_track, dimoc_tdi, dimoc_connectome.
class Image(ctypes.Structure):
    _fields_ = [("array", Array), ("affine", _DOUBLES), ("voxel_size", _DOUBLES)]


class StreamlinesRecord(ctypes.Structure):
    _fields_ = [("points", ctypes.POINTER(ctypes.c_float)),
                ("offsets", ctypes.POINTER(ctypes.c_uint64)), ("count", ctypes.c_size_t)]


class TrackInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("fod", Image), ("seed", Image), ("seed_gmwmi", Image),
                ("act", Image), ("ninclude", c_int), ("include", ctypes.POINTER(Image)),
                ("nexclude", c_int), ("exclude", ctypes.POINTER(Image)), ("nmask", c_int),
                ("mask", ctypes.POINTER(Image))]


class TrackOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("algorithm", c_char_p), ("select", c_long),
                ("seeds", c_long), ("seed_random_per_voxel", c_long), ("step", c_double),
                ("angle", c_double), ("cutoff", c_double), ("seed_cutoff", c_double),
                ("min_length", c_double), ("max_length", c_double), ("power", c_double),
                ("trials", c_long), ("samples", c_long), ("max_attempts_per_seed", c_long),
                ("unidirectional", c_int), ("stop", c_int), ("backtrack", c_int),
                ("crop_at_gmwmi", c_int), ("rseed", ctypes.c_ulonglong), ("threads", c_int),
                ("device", c_char_p), ("gpus", c_char_p), ("gpu_memory", c_long),
                ("precision", c_char_p), ("part", c_char_p)]


class TdiInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("streamlines", StreamlinesRecord),
                ("weights", ctypes.POINTER(ctypes.c_float)), ("step_size", c_double),
                ("shape", ctypes.c_size_t * 3), ("affine", _DOUBLES), ("voxel_size", _DOUBLES)]


class TdiOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("voxel", c_double * 3), ("exact", c_int),
                ("threads", c_int)]


class ConnectomeInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("streamlines", StreamlinesRecord),
                ("weights", ctypes.POINTER(ctypes.c_float)), ("parcellation", Image)]


class ConnectomeOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("threads", c_int)]


class CommitInput(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("streamlines", StreamlinesRecord), ("data", Image),
                ("mask", Array), ("bvals", _DOUBLES), ("bvecs", _DOUBLES), ("pulses", _DOUBLES),
                ("peaks", Array), ("groups", Array), ("blur_apply_to", Array),
                ("lambda_weights", Array), ("iso_mask", Array), ("lambda_iso_weights", Array),
                ("confidence_map", Array)]


class CommitOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("model", c_char_p), ("d_par", c_double),
                ("nd_perp", c_int), ("nd_iso", c_int), ("nradii", c_int), ("d_perp", _DOUBLES),
                ("d_iso", _DOUBLES), ("radii", _DOUBLES), ("fiber_shift", c_double * 3),
                ("min_seg_len", c_double), ("min_length", c_double), ("max_length", c_double),
                ("blur_core_extent", c_double), ("blur_gauss_extent", c_double),
                ("blur_spacing", c_double), ("blur_gauss_min", c_double),
                ("blur_clust_thr", c_double), ("confidence_map_rescale", c_int),
                ("vf_thr", c_double), ("ndirs", c_int), ("max_iter", c_int), ("tol", c_double),
                ("tol_x", c_double), ("lambda", c_double), ("lambda_group", c_double),
                ("lambda_ec", c_double), ("lambda_iso", c_double), ("allow_negative", c_char_p),
                ("debias", c_int), ("threads", c_int), ("device", c_char_p), ("gpus", c_char_p)]


# The statuses (dimoc_status) and severities (dimoc_severity) of include/dimoc.h.
OK, E_ARGUMENT, E_NOT_FOUND, E_IO, E_MODEL, E_LIMIT, E_MEMORY, E_CANCELLED, E_INTERNAL = range(9)
SEVERITIES = ("error", "warning", "note")

path = _library_path()
lib = ctypes.CDLL(path)

_ERRP = ctypes.POINTER(Error)
_HANDLE = ctypes.c_void_p
for name, restype, argtypes in [
        ("dimoc_api_version", c_int, []),
        ("dimoc_version", c_char_p, []),
        ("dimoc_last_error", _ERRP, []),
        ("dimoc_status_name", c_char_p, [c_int]),
        ("dimoc_free", None, [ctypes.c_void_p]),
        ("dimoc_free_list", None, [ctypes.POINTER(ctypes.c_char_p)]),
        ("dimoc_set_data_dir", c_int, [c_char_p]),
        ("dimoc_data_dir", ctypes.c_void_p, []),
        ("dimoc_shipped_models", c_int, [ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
                                         ctypes.POINTER(c_int)]),
        ("dimoc_model_open", c_int, [c_char_p, ctypes.POINTER(_HANDLE)]),
        ("dimoc_model_open_file", c_int, [c_char_p, ctypes.POINTER(_HANDLE)]),
        ("dimoc_model_open_source", c_int, [c_char_p, c_char_p, ctypes.POINTER(_HANDLE)]),
        ("dimoc_model_free", None, [_HANDLE]),
        ("dimoc_model_diagnostics", c_int, [_HANDLE, ctypes.POINTER(ctypes.POINTER(_ERRP))]),
        ("dimoc_model_problems", None, [_HANDLE, ctypes.POINTER(c_int), ctypes.POINTER(c_int)]),
        ("dimoc_model_describe", ctypes.POINTER(Description), [_HANDLE]),
        ("dimoc_model_summary", ctypes.c_void_p, [_HANDLE]),
        ("dimoc_model_generate", c_int, [_HANDLE, ctypes.POINTER(ctypes.c_void_p),
                                         ctypes.POINTER(ctypes.c_void_p)]),
        # A fit releases the GIL for its whole length (ctypes.CDLL does so for every call); the
        # progress and cancel callbacks take it back while they run.
        ("dimoc_fit", c_int, [_HANDLE, ctypes.POINTER(FitInput), ctypes.POINTER(FitOptions),
                              ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
        ("dimoc_fit_result_maps", c_int, [_HANDLE, ctypes.POINTER(ctypes.POINTER(
            ctypes.POINTER(FitMap)))]),
        ("dimoc_fit_result_provenance", c_char_p, [_HANDLE]),
        ("dimoc_fit_result_warnings", c_int, [_HANDLE, ctypes.POINTER(ctypes.POINTER(
            c_char_p))]),
        ("dimoc_fit_result_free", None, [_HANDLE]),
        # 1.2: results as named arrays, and the calls that make them
        ("dimoc_result_arrays", c_int, [_HANDLE, ctypes.POINTER(ctypes.POINTER(
            ctypes.POINTER(ResultArray)))]),
        ("dimoc_result_provenance", c_char_p, [_HANDLE]),
        ("dimoc_result_warnings", c_int, [_HANDLE, ctypes.POINTER(ctypes.POINTER(c_char_p))]),
        ("dimoc_result_free", None, [_HANDLE]),
        ("dimoc_track", c_int, [ctypes.POINTER(TrackInput), ctypes.POINTER(TrackOptions),
                                ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
        ("dimoc_tdi", c_int, [ctypes.POINTER(TdiInput), ctypes.POINTER(TdiOptions),
                              ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
        ("dimoc_connectome", c_int, [ctypes.POINTER(ConnectomeInput),
                                     ctypes.POINTER(ConnectomeOptions), ctypes.POINTER(Context),
                                     ctypes.POINTER(_HANDLE)]),
        ("dimoc_commit", c_int, [ctypes.POINTER(CommitInput), ctypes.POINTER(CommitOptions),
                                 ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
        ("dimoc_simulate", c_int, [_HANDLE, ctypes.POINTER(SimulateInput),
                                   ctypes.POINTER(SimulateOptions), ctypes.POINTER(Context),
                                   ctypes.POINTER(_HANDLE)]),
        ("dimoc_dti", c_int, [ctypes.POINTER(DwiInput), ctypes.POINTER(DtiOptions),
                              ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
        ("dimoc_response", c_int, [ctypes.POINTER(DwiInput), ctypes.POINTER(ResponseOptions),
                                   ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
        ("dimoc_csd", c_int, [ctypes.POINTER(DwiInput), ctypes.POINTER(CsdOptions),
                              ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
        ("dimoc_peaks", c_int, [ctypes.POINTER(PeaksInput), ctypes.POINTER(PeaksOptions),
                                ctypes.POINTER(Context), ctypes.POINTER(_HANDLE)]),
]:
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes

_version = lib.dimoc_api_version()
if _version // 1000 != API_MAJOR or _version % 1000 < API_MINOR:
    raise ImportError(f"dimoc: {path} has API version {_version // 1000}.{_version % 1000}; this "
                      f"package needs {API_MAJOR}.{API_MINOR} or a later {API_MAJOR}.x")


def text(b):
    """A C string of the library as str (None for NULL)."""
    return None if b is None else b.decode("utf-8", errors="replace")


def take_text(ptr):
    """Text the library allocated for the caller, as str; released."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", errors="replace")
    finally:
        lib.dimoc_free(ptr)


def last_error():
    return lib.dimoc_last_error().contents
