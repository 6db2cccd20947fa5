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
dm_model *dm_front_string(const char *file_name, const char *text, FILE *diag_out,
                          int *nerrors, int *nwarnings);

/* Work counts from the lowered code.  signal and gradient are the per-measurement parts
 * (dm_signal_at, dm_signal_grad_at), the work that scales with the number of measurements;
 * prepare and gradient_prepare are the once-per-voxel parts (dm_signal_prepare,
 * dm_signal_grad_prepare). */
typedef struct dm_flops {
    long signal;          /* arithmetic operations of dm_signal_at, transcendentals included */
    long signal_transc;   /* of which exp/log/sin/cos/sqrt/... calls */
    long gradient;        /* dm_signal_grad_at */
    long gradient_transc;
    long prepare;         /* dm_signal_prepare */
    long prepare_transc;
    long gradient_prepare; /* dm_signal_grad_prepare */
    long gradient_prepare_transc;
} dm_flops;

/* The generated sources of one model, as NUL-terminated strings owned by the caller
 * (free each with free()).  c_source is for the host compiler, cuda_source for NVRTC; both
 * define the functions documented in templates/model_api.h.  meta is the metadata file
 * (format: docs/metadata.md). */
typedef struct dm_generated {
    char *c_source;
    char *cuda_source;
    char *meta;
    dm_flops flops;
} dm_generated;

int dm_generate(const dm_model *m, dm_generated *out, FILE *err);
void dm_generated_free(dm_generated *g);

/* dm_generate, then write DIR/model.c, DIR/model.cu, DIR/model.meta (each atomically). */
int dm_emit_dir(const dm_model *m, const char *dir, FILE *err);

/* 64-bit FNV-1a of a byte string, printed as 16 hex digits in metadata and cache keys. */
unsigned long long dm_hash64(const void *data, size_t len, unsigned long long seed);

#endif
