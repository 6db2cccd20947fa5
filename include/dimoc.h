/* dimoc.h: the public C API of dimoc (libdimoc.so), for programs that embed the model compiler
 * and the fitter (fits on arrays in memory since 1.1, simulations since 1.2) and the trackers
 * (FOD tractography, track-density images, connectomes and COMMIT since 1.2).
 * docs/api.md is the guide; in short:
 *
 * - Versions: DIMOC_API_VERSION_MAJOR changes when a program built against an older header could
 *   break (a function removed or changed, a record's field moved); it is the library's SONAME
 *   (libdimoc.so.MAJOR).  DIMOC_API_VERSION_MINOR grows when functions or record fields are
 *   added.  Compare dimoc_api_version() with DIMOC_API_VERSION at run time.
 * - Handles are opaque (dimoc_model); records (dimoc_error, dimoc_parameter, ...) are owned by
 *   the library and read through the pointers it hands out: never allocate, copy or index an
 *   array of them yourself, since a minor version may add fields at their end.
 * - The library prints nothing.  A function that fails returns a dimoc_status other than
 *   DIMOC_OK (or NULL) and records the failure for dimoc_last_error(), thread-local.
 * - Strings are UTF-8 and NUL-terminated; text the library allocates for the caller is released
 *   with dimoc_free.
 * - Threads: every function may be called from any thread; a handle may be read from several
 *   threads at once once it is made, and freed by one when no other uses it. */
#ifndef DIMOC_H
#define DIMOC_H

#include <math.h> /* NAN: the options' "default" of 1.2's tracking */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DIMOC_API_VERSION_MAJOR 1
#define DIMOC_API_VERSION_MINOR 2
/* major * 1000 + minor, as dimoc_api_version() returns it */
#define DIMOC_API_VERSION (DIMOC_API_VERSION_MAJOR * 1000 + DIMOC_API_VERSION_MINOR)

#if defined(__GNUC__)
#define DIMOC_EXPORT __attribute__((visibility("default")))
#else
#define DIMOC_EXPORT
#endif

/* ---- versions ---- */

/* The API version of the library loaded: DIMOC_API_VERSION as it was built. */
DIMOC_EXPORT int dimoc_api_version(void);
/* dimoc's release ("0.1.0"), the same as `dimoc --version`. */
DIMOC_EXPORT const char *dimoc_version(void);

/* ---- errors ---- */

typedef enum dimoc_status {
    DIMOC_OK = 0,
    DIMOC_E_ARGUMENT = 1,  /* an argument is NULL, empty or out of range */
    DIMOC_E_NOT_FOUND = 2, /* no shipped model of that name, no data folder */
    DIMOC_E_IO = 3,        /* a file cannot be read or written */
    DIMOC_E_MODEL = 4,     /* the model has errors: its diagnostics say which */
    DIMOC_E_LIMIT = 5,     /* beyond what the runtime takes (too many parameters, a long name) */
    DIMOC_E_MEMORY = 6,    /* out of memory */
    DIMOC_E_CANCELLED = 7, /* the context's cancel callback asked to stop */
    DIMOC_E_INTERNAL = 8,  /* anything else (a bug: please report it) */
} dimoc_status;

typedef enum dimoc_severity {
    DIMOC_SEVERITY_ERROR = 0,
    DIMOC_SEVERITY_WARNING = 1,
    DIMOC_SEVERITY_NOTE = 2, /* explains the diagnostic before it (where an inlined call was) */
} dimoc_severity;

/* One error: the failure of a call (dimoc_last_error) or a model's diagnostic. */
typedef struct dimoc_error {
    dimoc_status code;
    dimoc_severity severity;
    /* One line.  A diagnostic's message has no position in front ("unknown name 'x'"); a
     * failure's names what it concerns ("unknown model 'x': ..."). */
    const char *message;
    const char *file; /* the file concerned (an imported one for a mistake there), or NULL */
    int line, column; /* 1-based, column in bytes; 0 where the error has no position */
    /* As dimoc prints it, ending in a newline: for a diagnostic the line
     * "file:line:col: error: message", the source line and a caret under the column, as
     * `dimoc check` prints it; for a failure the message and a newline. */
    const char *text;
} dimoc_error;

/* The last failure of a call on this thread (code DIMOC_OK before any).  Valid until the next
 * failing call on this thread; calls that succeed leave it as it was. */
DIMOC_EXPORT const dimoc_error *dimoc_last_error(void);
/* The name of a status, "DIMOC_E_MODEL"; "?" for none. */
DIMOC_EXPORT const char *dimoc_status_name(dimoc_status status);

/* Releases text and lists the library allocated for the caller (NULL: nothing). */
DIMOC_EXPORT void dimoc_free(void *text);
/* Releases a NULL-terminated list of strings and the strings (dimoc_shipped_models). */
DIMOC_EXPORT void dimoc_free_list(char **list);

/* ---- the context of long calls ---- */

/* Progress and cancellation of the long calls (dimoc_fit, dimoc_track, ...): a caller fills one
 * with DIMOC_CONTEXT_INIT, sets what it wants and passes it (or NULL: no callbacks).  Both
 * callbacks run on the calling thread, between pieces of work: cancel at most every 20 ms,
 * progress at most every 0.1 s and at the start of each stage. */
typedef struct dimoc_context {
    size_t size; /* sizeof(dimoc_context) as the caller compiled it: DIMOC_CONTEXT_INIT sets it */
    /* what is being done ("fit", "outputs") and how much of it, 0 to 1; NULL: not told */
    void (*progress)(void *user, const char *stage, double fraction);
    /* non-zero: stop as soon as possible and return DIMOC_E_CANCELLED; NULL: never */
    int (*cancel)(void *user);
    void *user; /* handed to both */
} dimoc_context;
#define DIMOC_CONTEXT_INIT                                                                         \
    {                                                                                              \
        sizeof(dimoc_context), NULL, NULL, NULL                                                    \
    }

/* ---- shipped data ---- */

/* Where the shipped models, templates and data are read from, ahead of every other place:
 * $DIMOC_DATA_DIR, the folders beside the library (LIBDIR/.. and LIBDIR/../share/dimoc), the
 * program's.  NULL: back to those.  Only needed where the library was moved away from its data. */
DIMOC_EXPORT dimoc_status dimoc_set_data_dir(const char *dir);
/* The folder the shipped models are read from (to free with dimoc_free), or NULL. */
DIMOC_EXPORT char *dimoc_data_dir(void);
/* The names of the shipped models, sorted, in a NULL-terminated list to free with
 * dimoc_free_list; *count (may be NULL) their number.  An empty list where none are found. */
DIMOC_EXPORT dimoc_status dimoc_shipped_models(char ***names, int *count);

/* ---- models ---- */

typedef struct dimoc_model dimoc_model;

/* Checks a model and keeps what the compiler understood of it.  SPEC is a shipped model's name
 * ("noddi_watson"), a path to a .model file (it holds a '/' or ends in .model) or the model's
 * source text (it holds a newline).
 * DIMOC_OK: *model is a checked model (its warnings in its diagnostics).  DIMOC_E_MODEL: *model
 * holds the model's diagnostics only; free it too.  Any other status: *model is NULL
 * (DIMOC_E_NOT_FOUND for an unknown name, DIMOC_E_IO for a file that cannot be read). */
DIMOC_EXPORT dimoc_status dimoc_model_open(const char *spec, dimoc_model **model);
/* The same for a path, whatever it looks like. */
DIMOC_EXPORT dimoc_status dimoc_model_open_file(const char *path, dimoc_model **model);
/* The same for source text.  file_name (NULL: "<string>") names it in diagnostics, and its
 * folder is where its imports are looked for (the working folder when it has none). */
DIMOC_EXPORT dimoc_status dimoc_model_open_source(const char *text, const char *file_name,
                                                  dimoc_model **model);
DIMOC_EXPORT void dimoc_model_free(dimoc_model *model);

/* The model's diagnostics, sorted by file and position as `dimoc check` prints them: errors,
 * warnings, each followed by its notes.  Returns their number; *records (may be NULL) the array
 * of pointers to them, owned by the model.  At most 20 errors are kept (then a record without
 * position says so); dimoc_model_problems counts them all. */
DIMOC_EXPORT int dimoc_model_diagnostics(const dimoc_model *model,
                                         const dimoc_error *const **records);
/* Every error and warning found, also those beyond the ones kept ("N errors, M warnings"). */
DIMOC_EXPORT void dimoc_model_problems(const dimoc_model *model, int *errors, int *warnings);

/* A parameter: its name, bounds, start and prior, as `dimoc info` shows them. */
typedef struct dimoc_parameter {
    const char *name;
    /* the bounds (-inf, inf where unbounded), and whether each belongs to the range: [ ] rather
     * than ( ) */
    double lower, upper;
    int lower_closed, upper_closed;
    /* the constant start (or the fallback of a data-driven one) */
    double init;
    /* "" for the constant, else as after `init from`: "b0", "md", "theta(1)", "phi(1)" */
    const char *start;
    /* "none", "uniform", "sphere", "ard", "gaussian", "gamma", "custom"; its constants: ard(a),
     * gaussian(a, b), gamma(a, b), else 0 */
    const char *prior;
    double prior_a, prior_b;
    double step; /* the MCMC proposal's starting width; 0: chosen */
    int periodic;
} dimoc_parameter;

/* A per-measurement input (one row per volume) or a per-voxel input (one map per voxel). */
typedef struct dimoc_input {
    const char *name;
    int width, column; /* values per row, and where they start in the model's input row */
    /* measures: "bvals", "bvecs", "scheme" (a column of --scheme) or "file" (--measure
     * NAME=FILE); per-voxel inputs: "map" */
    const char *source;
    const char *scheme_column; /* "scheme": the column it reads; else "" */
    int has_default;           /* per-voxel inputs: whether a map may be left out */
    double default_value;      /* ... and the value taken then */
} dimoc_input;

typedef enum dimoc_output_kind {
    DIMOC_OUTPUT_SCALAR = 0,
    DIMOC_OUTPUT_VECTOR = 1,
    DIMOC_OUTPUT_AXIS = 2, /* a direction without sign, averaged through its dyadic tensor */
} dimoc_output_kind;

/* A derived output (besides the one map per parameter that every fit writes). */
typedef struct dimoc_output {
    const char *name;
    dimoc_output_kind kind;
    const char *kind_name; /* "scalar", "vector", "axis" */
    int width, column;
} dimoc_output;

/* The operations of one evaluation, as `dimoc info` counts them. */
typedef struct dimoc_work {
    long signal, signal_transcendental;     /* per measurement */
    long gradient, gradient_transcendental; /* signal and gradient, per measurement */
    long prepare, gradient_prepare;         /* once per voxel and evaluation */
} dimoc_work;

typedef struct dimoc_model_description {
    const char *name, *description;
    const char *file; /* the .model file, or the file name given with the source text */
    const char *source_hash, *code_hash; /* 16 hex digits: the sources, the generated code */
    int multistart;                      /* LM starts per voxel the model asks for */
    int nparameters;
    const dimoc_parameter *const *parameters;
    int nmeasures;
    const dimoc_input *const *measures;
    int nvoxel_inputs;
    const dimoc_input *const *voxel_inputs;
    int noutputs;
    const dimoc_output *const *outputs;
    int measure_width, voxel_width, output_width; /* values per row of each */
    dimoc_work work;
} dimoc_model_description;

/* What the model is, owned by the model; NULL for a model with errors, or one the runtime
 * cannot take (DIMOC_E_LIMIT: too many parameters, a name too long), with the error recorded. */
DIMOC_EXPORT const dimoc_model_description *dimoc_model_describe(const dimoc_model *model);

/* The summary `dimoc check` prints of a clean model (inputs, parameters, lets, constraints,
 * outputs, the signal), to free with dimoc_free; NULL for a model with errors. */
DIMOC_EXPORT char *dimoc_model_summary(const dimoc_model *model);

/* The generated code as `dimoc compile` writes it: model_h the source that the host compiler
 * and NVRTC build (model.h), meta the metadata file (model.meta, docs/metadata.md).  Either
 * pointer may be NULL; the texts are the caller's, to free with dimoc_free. */
DIMOC_EXPORT dimoc_status dimoc_model_generate(const dimoc_model *model, char **model_h,
                                               char **meta);

/* ---- arrays (1.1) ---- */

typedef enum dimoc_dtype {
    DIMOC_FLOAT32 = 0,
    DIMOC_FLOAT64 = 1,
    DIMOC_UINT8 = 2, /* masks (a bool of C or numpy is one byte, 0 or 1) and the status */
    DIMOC_UINT32 = 3, /* (1.2) track-density counts */
    DIMOC_UINT64 = 4, /* (1.2) streamlines' offsets */
} dimoc_dtype;

/* An array of the caller's, read in place and never kept: element (i0, i1, ...) lies at
 * (const char *)data + i0 * strides[0] + i1 * strides[1] + ... bytes (strides of any sign:
 * numpy's layout, so that an array in C or Fortran order, or a view, crosses without a copy).
 * ndim 0 is one value at data.  Unlike the other records this one is fixed for the major
 * version (it is embedded in others by value). */
typedef struct dimoc_array {
    const void *data; /* NULL: not given */
    dimoc_dtype dtype;
    int ndim; /* 0 to 4 */
    size_t shape[4];
    ptrdiff_t strides[4];
} dimoc_array;

/* A named array: a per-voxel input or a start by its name in the model.  Fixed, as dimoc_array. */
typedef struct dimoc_named_array {
    const char *name;
    dimoc_array array;
} dimoc_named_array;

/* ---- fits on arrays (1.1) ---- */

/* What a fit reads.  Fill one with DIMOC_FIT_INPUT_INIT (size set, the rest empty). */
typedef struct dimoc_fit_input {
    size_t size; /* sizeof(dimoc_fit_input) as the caller compiled it */
    /* X x Y x Z x M, float32 or float64: M measurements (volumes) per voxel */
    dimoc_array data;
    /* X x Y x Z, uint8, float32 or float64: the voxels where it is non-zero (and not NaN);
     * data NULL: every voxel */
    dimoc_array mask;
    /* The gradient table, where the model reads b-values or directions: M b-values (s/mm^2)
     * and M x 3 directions, row by row, in FSL's bvecs frame, of length 1 where b > 0 (0 0 0 is
     * taken where b <= 50).  Or instead grad: M rows x y z b in world (scanner) coordinates,
     * MRtrix's table, turned into the bvecs frame with the affine. */
    const double *bvals, *bvecs;
    const double *grad;
    const double *affine; /* 4 x 4, row by row: voxel -> world mm (a NIfTI sform); or NULL */
    /* The model's other per-measurement inputs (read from a file or a scheme column by the
     * command), by the model's name: M values, or M x width */
    int nmeasures;
    const dimoc_named_array *measures;
    /* Per-voxel inputs (--voxel): X x Y x Z [x width] maps, or one value (ndim 0); those left
     * out take the model's defaults */
    int nvoxel_inputs;
    const dimoc_named_array *voxel_inputs;
} dimoc_fit_input;
#define DIMOC_FIT_INPUT_INIT                                                                       \
    {                                                                                              \
        sizeof(dimoc_fit_input), {NULL, DIMOC_FLOAT32, 0, {0}, {0}},                               \
            {NULL, DIMOC_UINT8, 0, {0}, {0}}, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL             \
    }

/* How to fit: the options of `dimoc fit`, by the same names (docs/fitting.md), as text where
 * the command takes text.  DIMOC_FIT_OPTIONS_INIT sets the command's defaults; a NULL string
 * is the default too. */
typedef struct dimoc_fit_options {
    size_t size;                    /* sizeof(dimoc_fit_options) as the caller compiled it */
    const char *method;             /* "lm"; "grid,lm", "lm,mcmc", "dictionary,lm", ... */
    const char *grid;               /* "f1=0,0.5,1;d=1e-3:5e-4:3e-3" (NULL: none) */
    const char *fixed;              /* "S0,d": held at their starts (NULL: none) */
    int ninit;                      /* --init: a start per parameter, one value or a map */
    const dimoc_named_array *init;  /* X x Y x Z (a map of the data's grid) or ndim 0 */
    const char *dictionary_penalty; /* "L1,L2" (NULL: 0.5,1e-3) */
    const char *noise;              /* "gaussian" | "rician" */
    long burnin, jumps, sample_every, update_every, lm_iterations;
    unsigned long long seed;
    int save_samples, predicted, ic; /* the maps NAME_samples, predicted, BIC and AIC */
    const char *out_type;            /* "float32" | "float64": the maps' type */
    const char *precision;           /* "float" | "double": the fitter's */
    int threads;                     /* 0: every core */
    const char *device;              /* "auto" | "cpu" | "gpu" */
    const char *gpus;                /* "all" | "0,1,.." */
    long gpu_memory;                 /* MB per GPU; 0: 70% of free memory */
    int lanes;                       /* GPU lanes per voxel; 0: chosen */
    const char *part;                /* "K/N": the K-th share of the voxels only (NULL: all) */
} dimoc_fit_options;
#define DIMOC_FIT_OPTIONS_INIT                                                                     \
    {                                                                                              \
        sizeof(dimoc_fit_options), "lm", NULL, NULL, 0, NULL, NULL, "gaussian", 1000, 1250, 25,  \
            40, 200, 42, 0, 0, 0, "float32", "double", 0, "auto", "all", 0, 0, NULL               \
    }

/* The status of a voxel in a fit's result (the status map). */
typedef enum dimoc_voxel_status {
    DIMOC_VOXEL_OUTSIDE = 0, /* not in the mask (or not in --part's share) */
    DIMOC_VOXEL_FITTED = 1,
    DIMOC_VOXEL_NOT_CONVERGED = 2, /* LM reached its iteration limit */
    DIMOC_VOXEL_SKIPPED_NONFINITE = 3,
    DIMOC_VOXEL_SKIPPED_ZERO = 4, /* every measurement 0 */
    DIMOC_VOXEL_FAILED = 5,
    DIMOC_VOXEL_AT_BOUND = 6, /* LM ended with a parameter within a hair of a bound */
} dimoc_voxel_status;

/* One map of a fit's result, on the data's grid. */
typedef struct dimoc_fit_map {
    /* the name of the file `dimoc fit` writes, without .nii.gz: a parameter's (S0), its
     * posterior sd (S0_std) and samples (S0_samples), an output's (dyads1) and its dispersion
     * (dyads1_dispersion), BIC, AIC, predicted, status */
    const char *name;
    /* "parameter", "std", "samples", "output", "dispersion", "ic", "predicted", "status" */
    const char *kind;
    int volumes;       /* values per voxel: 1, an output's width, the samples, M */
    dimoc_dtype dtype; /* out_type's (the status: DIMOC_UINT8) */
    /* X*Y*Z*volumes values, x fastest, then y, z, volume: numpy's order="F" of shape
     * (X, Y, Z) or (X, Y, Z, volumes); 0 where a voxel has no estimate */
    const void *data;
    size_t shape[4]; /* X, Y, Z, volumes */
} dimoc_fit_map;

typedef struct dimoc_fit_result dimoc_fit_result;

/* Fits `model` voxel by voxel on in-memory arrays, as `dimoc fit` does on files: the same
 * inputs and options give the same maps, bit for bit (for the same precision and seed).
 * options and context may be NULL (the defaults; no callbacks).  Nothing is printed: the
 * warnings the command prints are the result's (dimoc_fit_result_warnings).
 * DIMOC_OK: *result holds the maps, to free with dimoc_fit_result_free.  Otherwise *result is
 * NULL and the error recorded: DIMOC_E_ARGUMENT for inputs or options the fit cannot take (the
 * message names which), DIMOC_E_MODEL for a model with errors, DIMOC_E_CANCELLED when the
 * context's cancel asked to stop (the library stays usable), DIMOC_E_IO where the fitter
 * cannot be compiled.  The caller's arrays are read during the call only; --threads is set on
 * the calling thread for the call and given back after. */
DIMOC_EXPORT dimoc_status dimoc_fit(const dimoc_model *model, const dimoc_fit_input *input,
                                    const dimoc_fit_options *options,
                                    const dimoc_context *context, dimoc_fit_result **result);
/* The maps, in the order the command writes them (the parameters and their sd, the samples,
 * the outputs, BIC, AIC, predicted, the status last); the number of maps, *maps (may be NULL)
 * the array of pointers to them, owned by the result. */
DIMOC_EXPORT int dimoc_fit_result_maps(const dimoc_fit_result *result,
                                       const dimoc_fit_map *const **maps);
/* The map of that name, or NULL. */
DIMOC_EXPORT const dimoc_fit_map *dimoc_fit_result_map(const dimoc_fit_result *result,
                                                       const char *name);
/* provenance.json as the command writes it (inputs named "data", "mask", ...), owned by the
 * result. */
DIMOC_EXPORT const char *dimoc_fit_result_provenance(const dimoc_fit_result *result);
/* The warnings of the fit, one line each, as the command prints them after "dimoc: warning: ";
 * their number, *lines (may be NULL) the array, owned by the result. */
DIMOC_EXPORT int dimoc_fit_result_warnings(const dimoc_fit_result *result,
                                           const char *const **lines);
DIMOC_EXPORT void dimoc_fit_result_free(dimoc_fit_result *result);

/* ---- results as named arrays (1.2) ---- */

/* One array of a result: a map on the data's grid, X x Y x Z [x volumes] with x fastest
 * (numpy's order="F"), or a table, row by row.  `array` describes it fully (its strides say
 * the layout); its values are owned by the result. */
typedef struct dimoc_result_array {
    /* the name of the file the command writes, without its ending ("FA", "signal") */
    const char *name;
    /* what it is: "map", "mask", "status" (more kinds come with more calls) */
    const char *kind;
    dimoc_array array;
} dimoc_result_array;

/* What a call of 1.2 made (dimoc_simulate, ...): its arrays by name, provenance and warnings. */
typedef struct dimoc_result dimoc_result;

/* The arrays, in the order the command writes its files; their number, *arrays (may be NULL)
 * the array of pointers to them, owned by the result. */
DIMOC_EXPORT int dimoc_result_arrays(const dimoc_result *result,
                                     const dimoc_result_array *const **arrays);
/* The array of that name, or NULL. */
DIMOC_EXPORT const dimoc_result_array *dimoc_result_get(const dimoc_result *result,
                                                        const char *name);
/* The provenance the command writes (JSON, inputs named by the record's fields), owned by the
 * result; NULL where the call has none. */
DIMOC_EXPORT const char *dimoc_result_provenance(const dimoc_result *result);
/* The warnings the command would print, one line each; their number, *lines (may be NULL) the
 * array, owned by the result. */
DIMOC_EXPORT int dimoc_result_warnings(const dimoc_result *result, const char *const **lines);
DIMOC_EXPORT void dimoc_result_free(dimoc_result *result);

/* ---- simulating on arrays (1.2) ---- */

/* What a simulation reads.  Fill one with DIMOC_SIMULATE_INPUT_INIT. */
typedef struct dimoc_simulate_input {
    size_t size; /* sizeof(dimoc_simulate_input) as the caller compiled it */
    /* every parameter of the model by its name: one value (ndim 0) or an X x Y x Z map; the
     * maps set the grid, which is voxels x 1 x 1 where every parameter is one value */
    int nparams;
    const dimoc_named_array *params;
    /* per-voxel inputs: one value or an X x Y x Z [x width] map; those left out take the
     * model's defaults */
    int nvoxel_inputs;
    const dimoc_named_array *voxel_inputs;
    /* X x Y x Z: simulate where non-zero (and not NaN), 0 elsewhere; data NULL: every voxel */
    dimoc_array mask;
    /* M, the measurements (volumes) to simulate: the length of every per-measurement input */
    int volumes;
    /* M b-values (s/mm^2) and M x 3 unit directions, row by row, FSL's bvecs frame (where the
     * model reads them; the b-values also say which volumes are b = 0 for the SNR) */
    const double *bvals, *bvecs;
    /* the model's other per-measurement inputs by its names: M values, or M x width */
    int nmeasures;
    const dimoc_named_array *measures;
} dimoc_simulate_input;
#define DIMOC_SIMULATE_INPUT_INIT                                                                  \
    {                                                                                              \
        sizeof(dimoc_simulate_input), 0, NULL, 0, NULL, {NULL, DIMOC_UINT8, 0, {0}, {0}}, 0, NULL, \
            NULL, 0, NULL                                                                          \
    }

/* The options of `dimoc simulate` (DIMOC_SIMULATE_OPTIONS_INIT: its defaults). */
typedef struct dimoc_simulate_options {
    size_t size;              /* sizeof(dimoc_simulate_options) as the caller compiled it */
    const char *noise;        /* "none" | "gaussian" | "rician" */
    double snr;               /* sigma = the voxel's noise-free mean b = 0 signal / snr */
    unsigned long long seed;  /* of the noise (keyed by seed and voxel: any thread count) */
    long voxels;              /* where every parameter is one value: voxels x 1 x 1 */
    const char *out_type;     /* "float32" (the command's image) | "float64" */
    int threads;              /* 0: every core */
} dimoc_simulate_options;
#define DIMOC_SIMULATE_OPTIONS_INIT                                                                \
    {                                                                                              \
        sizeof(dimoc_simulate_options), "none", 30, 1, 1, "float32", 0                             \
    }

/* Evaluates `model` in every voxel and adds noise, as `dimoc simulate` does: the same inputs
 * and seed give the same image bit for bit (out_type float32 is the command's file).  The
 * result holds "signal" (X x Y x Z x M) and "mask" (uint8, X x Y x Z: 1 where the noise-free
 * signal is finite and positive), to free with dimoc_result_free.  The model's predict
 * function is compiled at its first use (stage "compile"), then the stage "simulate".
 * DIMOC_E_ARGUMENT for inputs the simulation cannot take (the message names which),
 * DIMOC_E_CANCELLED, DIMOC_E_IO where the model cannot be compiled. */
DIMOC_EXPORT dimoc_status dimoc_simulate(const dimoc_model *model,
                                         const dimoc_simulate_input *input,
                                         const dimoc_simulate_options *options,
                                         const dimoc_context *context, dimoc_result **result);

/* ---- diffusion-weighted data on arrays: the tensor fit (1.2) ---- */

/* A diffusion-weighted image and its gradient table: what dimoc_dti (and response estimation
 * and CSD) read.  Fill one with DIMOC_DWI_INPUT_INIT. */
typedef struct dimoc_dwi_input {
    size_t size; /* sizeof(dimoc_dwi_input) as the caller compiled it */
    /* X x Y x Z x M, float32 or float64: M measurements (volumes) per voxel */
    dimoc_array data;
    /* X x Y x Z, uint8, float32 or float64: the voxels where it is non-zero (and not NaN);
     * data NULL: every voxel */
    dimoc_array mask;
    /* M b-values (s/mm^2) and M x 3 directions, row by row, in FSL's bvecs frame of the image
     * (unit length where b > 0; 0 0 0 is taken where b <= 50); or instead grad: M rows x y z b
     * in world coordinates, MRtrix's table, turned into that frame with the affine */
    const double *bvals, *bvecs;
    const double *grad;
    /* 4 x 4, row by row: voxel -> world mm (a NIfTI's sform); NULL: the identity, as an image
     * without orientation.  Needed with grad, and where harmonics live in the world frame */
    const double *affine;
} dimoc_dwi_input;
#define DIMOC_DWI_INPUT_INIT                                                                       \
    {                                                                                              \
        sizeof(dimoc_dwi_input), {NULL, DIMOC_FLOAT32, 0, {0}, {0}},                               \
            {NULL, DIMOC_UINT8, 0, {0}, {0}}, NULL, NULL, NULL, NULL                               \
    }

/* The options of `dimoc dti` (DIMOC_DTI_OPTIONS_INIT: its defaults). */
typedef struct dimoc_dti_options {
    size_t size;                 /* sizeof(dimoc_dti_options) as the caller compiled it */
    const char *method;          /* "wls" (OLS, then WLS) | "ols" */
    int iter;                    /* -1: not given; 0..10: MRtrix dwi2tensor's -iter N */
    double min_signal;           /* 0: the command's (1e-4; with iter, 1e-6 x a voxel's most) */
    const char *min_diffusivity; /* "auto" | "none" | a number, as text */
    int save_tensor, sse;        /* the maps "tensor" and "sse" as well */
    const char *out_type;        /* "float32" (the command's files) | "float64" */
    int threads;                 /* 0: every core */
} dimoc_dti_options;
#define DIMOC_DTI_OPTIONS_INIT                                                                     \
    {                                                                                              \
        sizeof(dimoc_dti_options), "wls", -1, 0, "auto", 0, 0, "float32", 0                        \
    }

/* The linear tensor fit of every voxel, as `dimoc dti` does: the same inputs and options give
 * the same maps bit for bit.  The result's arrays are the command's files, by their names:
 * V1 V2 V3 (X x Y x Z x 3), L1 L2 L3, FA, MD, MO, S0, and tensor (6 volumes) and sse when
 * asked (kind "map"); the provenance counts the voxels fitted and skipped.  Stage "dti".
 * DIMOC_E_ARGUMENT for inputs or options the fit cannot take (the message names which),
 * DIMOC_E_CANCELLED. */
DIMOC_EXPORT dimoc_status dimoc_dti(const dimoc_dwi_input *input,
                                    const dimoc_dti_options *options,
                                    const dimoc_context *context, dimoc_result **result);

/* ---- response functions, CSD and peaks on arrays (1.2) ---- */

/* The options of `dimoc response` (DIMOC_RESPONSE_OPTIONS_INIT: its defaults). */
typedef struct dimoc_response_options {
    size_t size;           /* sizeof(dimoc_response_options) as the caller compiled it */
    const char *algorithm; /* "tournier" | "dhollander" | "fa" */
    int lmax;              /* of the WM response, even */
    int threads;           /* 0: every core */
} dimoc_response_options;
#define DIMOC_RESPONSE_OPTIONS_INIT                                                                \
    {                                                                                              \
        sizeof(dimoc_response_options), "tournier", 10, 0                                          \
    }

/* Estimates response functions from a DWI, as `dimoc response` does (MRtrix's dwi2response):
 * the same data and options give the same responses and voxels bit for bit.  The result holds
 * for each tissue T ("wm"; with dhollander also "gm" and "csf") "T_response" (float64, one row
 * per shell of zonal SH coefficients l = 0, 2, .., kind "response": the rows of the command's
 * T_response.txt), "T_response_shells" (float64, the rows' b-values, kind "shells") and
 * "T_voxels" (uint8 X x Y x Z, kind "voxels": the voxels it came from).  Stage "response" (not
 * interrupted: a cancel is seen when it ends).  DIMOC_E_ARGUMENT for inputs or options the
 * estimation cannot take or a mask without the voxels it needs, DIMOC_E_CANCELLED. */
DIMOC_EXPORT dimoc_status dimoc_response(const dimoc_dwi_input *input,
                                         const dimoc_response_options *options,
                                         const dimoc_context *context, dimoc_result **result);

/* A response function, as an MRtrix response file holds it.  Fixed for the major version
 * (arrays of them are the caller's), as dimoc_array. */
typedef struct dimoc_tissue_response {
    int shells;           /* rows */
    int coefficients;     /* per row: the zonal coefficients l = 0, 2, .., lmax */
    const double *values; /* shells x coefficients, row by row */
    /* the rows' b-values (a file's "# Shells:" comment), or NULL: matched to the data's shells
     * by order, as a file without one */
    const double *bvals;
} dimoc_tissue_response;

/* The options of `dimoc csd` (DIMOC_CSD_OPTIONS_INIT: its defaults). */
typedef struct dimoc_csd_options {
    size_t size; /* sizeof(dimoc_csd_options) as the caller compiled it */
    /* --response: WM[, GM], CSF (two are WM and CSF); none: estimated, as `algorithm` (NULL:
     * tournier for one shell, dhollander for several) and `msmt` say */
    int nresponses;
    const dimoc_tissue_response *responses;
    const char *algorithm;
    int msmt;
    int lmax; /* of the WM FOD, even; -1: 8, or the WM response's degree if lower */
    /* the directions the FODs are kept non-negative on: [ azimuth elevation ] pairs in
     * radians, row by row; 0: MRtrix's 300, as dwi2fod */
    int ndirections;
    const double *directions;
    int normalise;         /* mtnormalise -balanced of the tissues */
    const char *device;    /* "auto" | "cpu" | "gpu" */
    const char *gpus;      /* the GPU (its ordinal) */
    const char *precision; /* "float" | "double": single-shell CSD's */
    int threads;           /* 0: every core */
    int max_iter;          /* 0: 50 (single-shell) or 10 x unknowns */
    const char *part;      /* "K/N": the K-th share of the mask's voxels only (NULL: all) */
    const char *out_type;  /* "float32" (the command's files) | "float64" */
} dimoc_csd_options;
#define DIMOC_CSD_OPTIONS_INIT                                                                     \
    {                                                                                              \
        sizeof(dimoc_csd_options), 0, NULL, NULL, 0, -1, 0, NULL, 0, "auto", "0", "double", 0,     \
            0, NULL, "float32"                                                                     \
    }

/* Constrained spherical deconvolution of every voxel of the mask, as `dimoc csd` does: the
 * same inputs and options give the same FODs bit for bit.  The result holds "wm_fod" (X x Y x
 * Z x K SH coefficients in MRtrix's basis and world frame, kind "fod"), "gm" and "csf" (the
 * l = 0 coefficient, kind "map") as there are tissues, the responses used ("T_response" and
 * "T_response_shells" as dimoc_response makes them), the voxels of estimated responses
 * ("T_voxels") and "status" (uint8: 1 solved, 2 iteration limit, 3 degenerate constraints,
 * 4 NaN/Inf signal, 0 outside the mask), the command's maps by their file names.  The
 * directions are turned into world space with the input's affine.  Stages "response" (when
 * estimated), "csd" (the fraction of the voxels, between blocks of them on the CPU) and
 * "normalise".  DIMOC_E_ARGUMENT, DIMOC_E_CANCELLED, DIMOC_E_IO (device "gpu" without a usable
 * GPU). */
DIMOC_EXPORT dimoc_status dimoc_csd(const dimoc_dwi_input *input, const dimoc_csd_options *options,
                                    const dimoc_context *context, dimoc_result **result);

/* What a peak search reads.  DIMOC_PEAKS_INPUT_INIT. */
typedef struct dimoc_peaks_input {
    size_t size;      /* sizeof(dimoc_peaks_input) as the caller compiled it */
    dimoc_array fod;  /* X x Y x Z x K SH coefficients (K = 1, 6, 15, 28, 45, 66, 91, ...) */
    dimoc_array mask; /* X x Y x Z: search where non-zero; data NULL: every voxel */
    /* 4 x 4 voxel -> world, row by row (the FOD's): the dyads in FSL's frame; NULL: identity */
    const double *affine;
} dimoc_peaks_input;
#define DIMOC_PEAKS_INPUT_INIT                                                                     \
    {                                                                                              \
        sizeof(dimoc_peaks_input), {NULL, DIMOC_FLOAT32, 0, {0}, {0}},                             \
            {NULL, DIMOC_UINT8, 0, {0}, {0}}, NULL                                                 \
    }

/* The options of `dimoc peaks` (DIMOC_PEAKS_OPTIONS_INIT: its defaults). */
typedef struct dimoc_peaks_options {
    size_t size;          /* sizeof(dimoc_peaks_options) as the caller compiled it */
    int num;              /* peaks kept per voxel, largest first, 1 to 16 */
    double threshold;     /* absolute amplitude below which peaks are dropped */
    double relative;      /* peaks below it x the voxel's largest are dropped (0: none) */
    const char *out_type; /* "float32" (the command's files) | "float64" */
    int threads;          /* 0: every core */
} dimoc_peaks_options;
#define DIMOC_PEAKS_OPTIONS_INIT                                                                   \
    {                                                                                              \
        sizeof(dimoc_peaks_options), 3, 0, 0.1, "float32", 0                                       \
    }

/* The peaks of every voxel's FOD, as `dimoc peaks` finds them: "peaks" (X x Y x Z x 3 num, as
 * MRtrix's sh2peaks: x y z of each peak in world space scaled by its amplitude, NaN where
 * none), "dyadsK" (X x Y x Z x 3, unit vectors in FSL's bvecs frame, 0 where none) and
 * "peak_ampK" for K = 1 .. num, kind "map".  Stage "peaks".  DIMOC_E_ARGUMENT,
 * DIMOC_E_CANCELLED. */
DIMOC_EXPORT dimoc_status dimoc_peaks(const dimoc_peaks_input *input,
                                      const dimoc_peaks_options *options,
                                      const dimoc_context *context, dimoc_result **result);

/* ---- tractography and what follows it, on arrays (1.2) ---- */

/* An image of the caller's with its grid: the array read in place (as dimoc_array), its voxel
 * -> world matrix and its voxel sizes.  Fixed for the major version (embedded by value), as
 * dimoc_array. */
typedef struct dimoc_image {
    dimoc_array array;    /* X x Y x Z [x K]; data NULL: not given */
    const double *affine; /* 4 x 4, row by row: voxel -> world mm; NULL: the grid of the call's
                             reference image (the FOD's for dimoc_track), when the shape is its */
    /* 3 values: the voxel sizes of the image's header (a NIfTI's pixdim), which the commands
     * and MRtrix read (tckgen's default step and lengths, tckmap's grid); NULL: the lengths of
     * the affine's columns, which a header written from the affine holds */
    const double *voxel_size;
} dimoc_image;
#define DIMOC_IMAGE_NONE                                                                           \
    {                                                                                              \
        {NULL, DIMOC_FLOAT32, 0, {0}, {0}}, NULL, NULL                                             \
    }

/* Streamlines in world millimetres (the .tck's frame), read in place.  Fixed as dimoc_array.
 * dimoc_track's result holds them as its arrays "points" and "offsets". */
typedef struct dimoc_streamlines {
    const float *points;     /* 3 values a point (x y z), streamline after streamline */
    const uint64_t *offsets; /* count + 1: streamline i is points offsets[i] .. offsets[i+1] - 1 */
    size_t count;
} dimoc_streamlines;

/* What FOD tractography reads (`dimoc track --fod`'s images).  DIMOC_TRACK_INPUT_INIT. */
typedef struct dimoc_track_input {
    size_t size; /* sizeof(dimoc_track_input) as the caller compiled it */
    /* X x Y x Z x K SH coefficients in MRtrix's basis (dimoc csd's wm_fod: K = 6, 15, 28, 45,
     * 66 or 91), with its affine; NaN or infinite coefficients are 0, as the command reads
     * them; a voxel whose coefficients are all 0 is outside */
    dimoc_image fod;
    /* --seed: seeds at random positions in its voxels >= 0.5 (3D, any grid); or seed_gmwmi
     * (with act): seeds drawn in proportion to its values > 0 and moved onto the grey-white
     * interface (5ttgen's gmwmi image).  One of the two. */
    dimoc_image seed, seed_gmwmi;
    dimoc_image act; /* --act: X x Y x Z x 5 tissues (cortical GM, sub-cortical GM, WM, CSF,
                        pathology); data NULL: none */
    /* --include, --exclude, --mask: 3D regions (voxels >= 0.5), any grid, 16 in all at most */
    int ninclude;
    const dimoc_image *include;
    int nexclude;
    const dimoc_image *exclude;
    int nmask;
    const dimoc_image *mask;
} dimoc_track_input;
#define DIMOC_TRACK_INPUT_INIT                                                                     \
    {                                                                                              \
        sizeof(dimoc_track_input), DIMOC_IMAGE_NONE, DIMOC_IMAGE_NONE, DIMOC_IMAGE_NONE,           \
            DIMOC_IMAGE_NONE, 0, NULL, 0, NULL, 0, NULL                                            \
    }

/* The options of `dimoc track --fod`, by the same names (docs/tracking.md).
 * DIMOC_TRACK_OPTIONS_INIT sets the command's defaults: NaN for a number, -1 for a count
 * whose default tckgen resolves (against the FOD's voxel size, the algorithm, ACT). */
typedef struct dimoc_track_options {
    size_t size;           /* sizeof(dimoc_track_options) as the caller compiled it */
    const char *algorithm; /* "ifod2" | "ifod1" | "sd_stream" */
    long select;           /* streamlines to keep (0: as many as the seeds give); -1: 5000 */
    long seeds;            /* seeds to try at most (0: no limit); -1: 1000 x select */
    long seed_random_per_voxel; /* N seeds in every seed voxel instead (0: off) */
    double step, angle, cutoff, seed_cutoff, min_length, max_length, power; /* mm, degrees */
    long trials, samples, max_attempts_per_seed;
    int unidirectional, stop, backtrack, crop_at_gmwmi; /* the flags */
    unsigned long long rseed;                           /* Philox's seed: the same, the same tracks */
    int threads;                                        /* 0: every core */
    const char *device;                                 /* "auto" | "cpu" | "gpu" */
    const char *gpus;                                   /* the GPU's ordinal ("0") */
    long gpu_memory;                                    /* MB; 0: 70% of free memory */
    const char *precision;                              /* "float" | "double" */
    const char *part;                                   /* "K/N": a share of the seed ids */
} dimoc_track_options;
#define DIMOC_TRACK_OPTIONS_INIT                                                                   \
    {                                                                                              \
        sizeof(dimoc_track_options), "ifod2", -1, -1, 0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, -1,    \
            -1, -1, 0, 0, 0, 0, 0, 0, "auto", "0", 0, "float", NULL                                \
    }

/* FOD tractography on arrays, as `dimoc track --fod` on files: the same images, options and
 * rseed give the same streamlines, point for point (float32, world mm), in the same order.
 * The result's arrays: "points" (float32, npoints x 3) and "offsets" (uint64, count + 1), the
 * streamlines as dimoc_streamlines takes them; its provenance is the command's
 * provenance.json (the resolved options, counts of every verdict and termination).  Stages
 * "load" (the plan: the FOD in the tracker's layout, the calibration), "compile" (GPU), "track"
 * (the fraction of --select, else of the seeds).  DIMOC_E_ARGUMENT for inputs or options the
 * command refuses (the message names which), DIMOC_E_CANCELLED (tracking stops within a
 * streamline of each thread on the CPU, a batch on the GPU; nothing is kept). */
DIMOC_EXPORT dimoc_status dimoc_track(const dimoc_track_input *input,
                                      const dimoc_track_options *options,
                                      const dimoc_context *context, dimoc_result **result);

/* A track-density image (`dimoc tdi`, tckmap -template).  DIMOC_TDI_INPUT_INIT. */
typedef struct dimoc_tdi_input {
    size_t size; /* sizeof(dimoc_tdi_input) as the caller compiled it */
    dimoc_streamlines streamlines;
    /* one weight >= 0 per streamline (tckmap -tck_weights_in: each voxel the sum of the
     * weights of the streamlines through it, float32); NULL: counts (uint32) */
    const float *weights;
    /* the streamlines' step (mm) as a .tck header's step_size gives it (written "%g"), from
     * which tckmap's upsampling ratio comes; 0 or NaN: none, as a tractogram without one */
    double step_size;
    size_t shape[3];          /* the template's grid: its size, */
    const double *affine;     /* voxel -> world (4 x 4, row by row), */
    const double *voxel_size; /* and header voxel sizes (NULL: the affine's column lengths) */
} dimoc_tdi_input;
#define DIMOC_TDI_INPUT_INIT                                                                       \
    {                                                                                              \
        sizeof(dimoc_tdi_input), {NULL, NULL, 0}, NULL, 0, {0, 0, 0}, NULL, NULL                   \
    }

typedef struct dimoc_tdi_options {
    size_t size;     /* sizeof(dimoc_tdi_options) as the caller compiled it */
    double voxel[3]; /* --voxel: super-resolution, mm on the template's axes; 0 0 0: its grid */
    int exact;       /* --exact: every voxel a segment crosses, instead of tckmap's samples */
    int threads;     /* 0: every core */
} dimoc_tdi_options;
#define DIMOC_TDI_OPTIONS_INIT                                                                     \
    {                                                                                              \
        sizeof(dimoc_tdi_options), {0, 0, 0}, 0, 0                                                 \
    }

/* The map `dimoc tdi` writes, value for value: the result's "tdi" (uint32 counts, or float32
 * sums with weights; X x Y x Z of the map's grid, x fastest) and "affine" (float64 4 x 4, row
 * by row: the map's voxel -> world, the template's or the super-resolved grid's).  Stage
 * "tdi".  DIMOC_E_ARGUMENT, DIMOC_E_CANCELLED. */
DIMOC_EXPORT dimoc_status dimoc_tdi(const dimoc_tdi_input *input, const dimoc_tdi_options *options,
                                    const dimoc_context *context, dimoc_result **result);

/* A structural connectome (`dimoc connectome`, tck2connectome's defaults).
 * DIMOC_CONNECTOME_INPUT_INIT. */
typedef struct dimoc_connectome_input {
    size_t size; /* sizeof(dimoc_connectome_input) as the caller compiled it */
    dimoc_streamlines streamlines;
    const float *weights; /* one weight >= 0 per streamline (-tck_weights_in), or NULL */
    /* integer node labels 1..N, 0 outside the nodes (3D, uint8, float32 or float64), with its
     * affine (required) */
    dimoc_image parcellation;
} dimoc_connectome_input;
#define DIMOC_CONNECTOME_INPUT_INIT                                                                \
    {                                                                                              \
        sizeof(dimoc_connectome_input), {NULL, NULL, 0}, NULL, DIMOC_IMAGE_NONE                    \
    }

typedef struct dimoc_connectome_options {
    size_t size; /* sizeof(dimoc_connectome_options) as the caller compiled it */
    int threads; /* 0: every core */
} dimoc_connectome_options;
#define DIMOC_CONNECTOME_OPTIONS_INIT                                                              \
    {                                                                                              \
        sizeof(dimoc_connectome_options), 0                                                        \
    }

/* The matrices `dimoc connectome` writes, value for value: the result's "connectome"
 * (streamlines, or the sums of their weights, per edge) and "mean_length" (mm), float64,
 * nodes x nodes row by row, the upper triangle with the diagonal (0 below) as the .csv files;
 * the provenance counts the streamlines assigned and not.  Stage "connectome".
 * DIMOC_E_ARGUMENT, DIMOC_E_CANCELLED. */
DIMOC_EXPORT dimoc_status dimoc_connectome(const dimoc_connectome_input *input,
                                           const dimoc_connectome_options *options,
                                           const dimoc_context *context, dimoc_result **result);

/* COMMIT (`dimoc commit`): a weight per streamline, fitted to the data.
 * DIMOC_COMMIT_INPUT_INIT. */
typedef struct dimoc_commit_input {
    size_t size; /* sizeof(dimoc_commit_input) as the caller compiled it */
    dimoc_streamlines streamlines;
    /* X x Y x Z x M diffusion-weighted data (X x Y x Z: volume-fractions' map), float32 or
     * float64, with its affine (required: the streamlines are world mm) */
    dimoc_image data;
    /* X x Y x Z: segments where it is not > 0 are left out; data NULL: the whole image */
    dimoc_array mask;
    /* M b-values (s/mm^2) and M x 3 directions, row by row, FSL's bvecs frame of the data */
    const double *bvals, *bvecs;
    /* cylinder-zeppelin-ball: M x 3, row by row, each volume's G (T/m), Delta and delta (s)
     * (--scheme's columns) */
    const double *pulses;
    /* --peaks: X x Y x Z x 3P (sh2peaks' layout, NaN: no peak); data NULL: the principal
     * direction of a tensor fit */
    dimoc_array peaks;
    /* --groups, --blur-apply-to, --lambda-weights: one value per streamline, in their order
     * (with blur_clust_thr, or one per cluster's representative); data NULL: not given */
    dimoc_array groups, blur_apply_to, lambda_weights;
    /* --iso-mask, --lambda-iso-weights (X x Y x Z), --confidence-map (X x Y x Z [x M]) */
    dimoc_array iso_mask, lambda_iso_weights, confidence_map;
} dimoc_commit_input;
#define DIMOC_ARRAY_NONE                                                                           \
    {                                                                                              \
        NULL, DIMOC_FLOAT32, 0, {0}, {0}                                                           \
    }
#define DIMOC_COMMIT_INPUT_INIT                                                                    \
    {                                                                                              \
        sizeof(dimoc_commit_input), {NULL, NULL, 0}, DIMOC_IMAGE_NONE, DIMOC_ARRAY_NONE, NULL,    \
            NULL, NULL, DIMOC_ARRAY_NONE, DIMOC_ARRAY_NONE, DIMOC_ARRAY_NONE, DIMOC_ARRAY_NONE,   \
            DIMOC_ARRAY_NONE, DIMOC_ARRAY_NONE, DIMOC_ARRAY_NONE                                   \
    }

/* The options of `dimoc commit`'s fit, by the same names (docs/commit.md);
 * DIMOC_COMMIT_OPTIONS_INIT sets its defaults (NaN, or no list: the model's). */
typedef struct dimoc_commit_options {
    size_t size;       /* sizeof(dimoc_commit_options) as the caller compiled it */
    const char *model; /* "stick-zeppelin-ball" | "cylinder-zeppelin-ball" | "volume-fractions" */
    double d_par;      /* mm^2/s; NaN: 1.7e-3 (cylinder-zeppelin-ball: 0.6e-3) */
    int nd_perp, nd_iso, nradii; /* the lists' lengths (0: the model's defaults) */
    const double *d_perp, *d_iso; /* mm^2/s */
    const double *radii;          /* micrometres */
    double fiber_shift[3];        /* voxels */
    double min_seg_len, min_length, max_length; /* mm */
    double blur_core_extent, blur_gauss_extent, blur_spacing, blur_gauss_min, blur_clust_thr;
    int confidence_map_rescale;
    double vf_thr;
    int ndirs, max_iter;
    double tol, tol_x;
    double lambda, lambda_group, lambda_ec, lambda_iso;
    const char *allow_negative; /* "ic,ec,iso" or a part of it (NULL: none) */
    int debias;
    int threads;        /* 0: every core */
    const char *device; /* "auto" | "cpu" | "gpu" */
    const char *gpus;   /* the GPU's ordinal ("0") */
} dimoc_commit_options;
#define DIMOC_COMMIT_OPTIONS_INIT                                                                  \
    {                                                                                              \
        sizeof(dimoc_commit_options), "stick-zeppelin-ball", NAN, 0, 0, 0, NULL, NULL, NULL,      \
            {0, 0, 0}, 1e-3, 0, 250, 0, 0, 0.25, 0.1, 0, 0, 0.1, 500, 100, 1e-3, 1e-6, 0, 0, 0, 0, \
            NULL, 0, 0, "auto", "0"                                                                \
    }

/* COMMIT's fit as `dimoc commit` makes it on files: the same inputs and options give the same
 * weights and maps (the result's arrays, by the names of the command's files): "weights"
 * (float64, one per streamline: streamline_weights.txt's, which holds them "%.5e"),
 * "compartment_IC", "compartment_EC", "compartment_ISO" (with --iso-mask under
 * volume-fractions "compartment_LESION" and "R_scaling_factor" too), "fit_RMSE",
 * "fit_NRMSE" (and "fit_RMSE_adjusted", "fit_NRMSE_adjusted" with a confidence map): float32
 * maps on the data's grid, as the command writes them.  The provenance is the command's.
 * Stages "load", "dictionary", "solve" (the fraction of max_iter), "debias", "outputs"; a
 * cancel is taken between stages and the solver's iterations.  DIMOC_E_ARGUMENT for inputs
 * or options the command refuses (streamlines that miss the data's grid or mask among them),
 * DIMOC_E_CANCELLED. */
DIMOC_EXPORT dimoc_status dimoc_commit(const dimoc_commit_input *input,
                                       const dimoc_commit_options *options,
                                       const dimoc_context *context, dimoc_result **result);

#ifdef __cplusplus
}
#endif

#endif
