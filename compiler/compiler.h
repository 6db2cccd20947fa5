/* Public interface of the model compiler: front end (parse + check) and back end (lower,
 * differentiate, emit).  The command-line program and the runtime use only this header. */
#ifndef DIMOC_COMPILER_H
#define DIMOC_COMPILER_H

#include <stdio.h>
#include "ast.h"

/* Parse and check.  Diagnostics ("file:line:col: error: msg", the source line and a caret)
 * go to diag_out (NULL: stderr).  Returns NULL when the file has errors; warnings alone do not
 * fail.  The counts are optional. */
dm_model *dm_front_file(const char *path, FILE *diag_out, int *nerrors, int *nwarnings);
dm_model *dm_front_string(const char *file_name, const char *text, FILE *diag_out, int *nerrors,
                          int *nwarnings);

/* A diagnostic of the front end as data.  line and col are 1-based (0: a message about the
 * file as a whole); severity is "error", "warning" or "note" (a note follows the message it
 * explains); text is the message as printed: "file:line:col: error: message", the source line
 * and the caret. */
typedef struct dm_diagnostic {
    const char *file;
    int line, col;
    const char *severity;
    const char *message;
    const char *text;
} dm_diagnostic;
typedef void (*dm_diagnostic_sink)(void *user, const dm_diagnostic *d);
/* Until called again with NULL, the front end's runs on this thread hand each diagnostic to
 * SINK, in the order they would be printed, instead of printing it (the records live for the
 * call only).  A file that cannot be read is still printed: read it first. */
void dm_front_capture(dm_diagnostic_sink sink, void *user);

/* Work counts from the lowered code.  signal and gradient are the per-measurement parts
 * (dm_signal_at, dm_signal_grad_at), the work that scales with the number of measurements;
 * prepare and gradient_prepare are the once-per-voxel parts (dm_signal_prepare,
 * dm_signal_grad_prepare); fix the parameter-free per-measurement part (dm_signal_fix). */
typedef struct dm_flops {
    long signal;        /* arithmetic operations of dm_signal_at, transcendentals included */
    long signal_transc; /* of which exp/log/sin/cos/sqrt/... calls */
    long gradient;      /* dm_signal_grad_at */
    long gradient_transc;
    long prepare; /* dm_signal_prepare */
    long prepare_transc;
    long gradient_prepare; /* dm_signal_grad_prepare */
    long gradient_prepare_transc;
    long fix; /* dm_signal_fix: once per voxel and measurement, before a fit */
    long stage_rows;     /* a stage program's dm_row_stage: per voxel and measurement */
    long signal_special; /* calls in dm_signal_at of more than an elementary function */
    long fix_transc;
    int fix_width; /* DM_FIX_WIDTH: the fixed values that extend each measurement row */
    int pre_width;      /* DM_PRE_WIDTH: the values dm_signal_prepare makes */
    int fix_base_width; /* DM_FIX_BASE_WIDTH: the fixed values that read no stage value */
    /* A stage program's (dm_generate_stage): DM_STAGE_WIDTH, the values of its held
     * parameters appended to the voxel row, and DM_ROWS_PER_VOXEL, 1 when the fixed values
     * read them (each voxel's rows are its own); DM_PREPARE_READS_STAGE, 1 when the
     * measurement-free part of the signal (dm_signal_prepare) reads a stage value, so that it
     * differs between the voxels of one point. */
    int stage_width, rows_per_voxel, prepare_reads_stage;
} dm_flops;

/* What the back end makes of one model, as NUL-terminated strings owned by the caller (free
 * them with dm_generated_free).  source is the generated code, one text that both the host
 * compiler and NVRTC compile (the includer defines `real` and DM_FN; it defines the functions
 * documented in templates/fit/model_api.h); meta is the metadata file (format: docs/metadata.md),
 * written for people and other tools; flops are the work counts it prints. */
typedef struct dm_generated {
    char *source;
    char *meta;
    dm_flops flops;
} dm_generated;

/* Lowers, differentiates and emits a checked model.  Errors go to err (NULL: stderr).  0 or
 * -1; on failure *out holds nothing to free. */
int dm_generate(const dm_model *m, dm_generated *out, FILE *err);
/* The program of one stage of a fit that holds the parameters `held` (bit k: parameter k)
 * constant throughout: their values are computed once per voxel (dm_voxel_extend, appended to
 * the voxel row), the work they make parameter-free becomes fixed values of the voxel's rows,
 * and the gradient has no partials of them (templates/fit/model_api.h, "Stage programs").
 * A fitter built from it fits only runs whose config holds them (dm_fit_config.held_mask).
 * held 0 is dm_generate. */
int dm_generate_stage(const dm_model *m, unsigned held, dm_generated *out, FILE *err);
void dm_generated_free(dm_generated *g);

/* dm_generate, then write DIR/model.h (the source) and DIR/model.meta, each atomically;
 * other files in DIR are left alone. */
int dm_emit_dir(const dm_model *m, const char *dir, FILE *err);

/* 64-bit FNV-1a of a byte string, printed as 16 hex digits in metadata and cache keys. */
unsigned long long dm_hash64(const void *data, size_t len, unsigned long long seed);

/* The hash of a model's source: its file, then every file it imports, in order (the same as
 * the file's own hash when it imports nothing), so that editing a library changes it, and
 * with it the generated code and every cache key. */
unsigned long long dm_model_source_hash(const dm_model *m);

/* `dimoc check`: the one-screen summary of a clean model (front/summary.c). */
/* Name, description, inputs with their columns, parameters with bounds, init, prior, step
 * and periodicity, lets with their types, constraints and outputs. */
void dm_print_summary(const dm_model *m, FILE *out);

/* An expression in source syntax, with only the parentheses it needs. */
void dm_print_expr(const dm_expr *e, FILE *out);

#endif
