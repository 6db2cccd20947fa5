/* dimoc.h: the public C API of dimoc (libdimoc.so), for programs that embed the model compiler
 * and, in later versions, the fitters and trackers.  docs/api.md is the guide; in short:
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

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DIMOC_API_VERSION_MAJOR 1
#define DIMOC_API_VERSION_MINOR 0
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

/* Progress and cancellation of the long calls of later versions (fits, tracking): a caller
 * fills one with DIMOC_CONTEXT_INIT, sets what it wants and passes it (or NULL: no callbacks).
 * Both callbacks run on the calling thread, between pieces of work. */
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

#ifdef __cplusplus
}
#endif

#endif
