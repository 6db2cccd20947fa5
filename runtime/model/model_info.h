/* A compiled model as the runtime sees it: what the metadata file (docs/metadata.md) says,
 * taken from the checked model itself, plus its generated source. */
#ifndef DIMOC_MODEL_INFO_H
#define DIMOC_MODEL_INFO_H

#include "fit/model_api.h"

#define DM_NAME_MAX 64

typedef enum { DM_SRC_BVALS, DM_SRC_BVECS, DM_SRC_FILE, DM_SRC_SCHEME } dm_measure_source;

typedef struct dm_measure_info {
    char name[DM_NAME_MAX];
    int width, column;
    dm_measure_source source;
    char scheme_column[DM_NAME_MAX]; /* DM_SRC_SCHEME: the column of --scheme it reads */
    int line, col;                   /* where the model declares its source, for messages */
} dm_measure_info;

typedef struct dm_voxel_info {
    char name[DM_NAME_MAX];
    int width, column;
    double default_value; /* NaN: required */
} dm_voxel_info;

/* Where a parameter's start comes from (docs/model-language.md, `init`). */
typedef enum {
    DM_START_CONST, /* the `init` constant (or the default rule) */
    DM_START_B0,    /* the mean b=0 signal (`init b0`, `init from b0`) */
    DM_START_MD,    /* the tensor's mean diffusivity (`init from md`) */
    DM_START_THETA, /* the polar angle of the tensor's eigenvector `axis` (`init from theta(K)`) */
    DM_START_PHI,   /* its azimuth (`init from phi(K)`) */
} dm_start_rule;

typedef struct dm_param_info {
    char name[DM_NAME_MAX];
    double lo, hi, init, prior_a, prior_b, step;
    int lo_closed, hi_closed, periodic;
    dm_start_rule start; /* init: the fallback where the rule has no value for a voxel */
    int start_axis;      /* THETA, PHI: the eigenvector K, 1 to 3 (largest eigenvalue first) */
    char prior[16];
} dm_param_info;

/* The start rule as the model writes it after `init from` ("b0", "md", "theta(2)"), or ""
 * for a constant. */
const char *dm_start_rule_text(const dm_param_info *x, char *buf, int size);

typedef enum { DM_OUTK_SCALAR, DM_OUTK_VECTOR, DM_OUTK_AXIS } dm_output_kind_info;

typedef struct dm_output_info {
    char name[DM_NAME_MAX];
    dm_output_kind_info kind;
    int width, column;
} dm_output_info;

typedef struct dm_model_info {
    char name[DM_NAME_MAX];
    char description[256];
    char file[1024]; /* the .model file it was compiled from (for file:line:col messages) */
    char source_hash[17], code_hash[17];
    /* Per measurement (the part that scales with M), and once per evaluation of all of them. */
    long flops_signal, flops_signal_transc, flops_gradient, flops_gradient_transc;
    long flops_prepare, flops_gradient_prepare;
    long flops_stage_rows; /* a stage program's dm_row_stage (per voxel and measurement) */
    long signal_special;   /* calls in dm_signal_at of more than an elementary function */
    int nparams, nmeasures, nvoxels, noutputs;
    int measure_width, voxel_width, output_width;
    int fix_width;  /* DM_FIX_WIDTH: fixed values per measurement row, computed before a fit */
    int multistart; /* LM starts per voxel the model asks for (`multistart N`; 1 without) */
    /* A stage program's (dm_model_stage): the parameters it holds, DM_STAGE_WIDTH,
     * DM_ROWS_PER_VOXEL and DM_PREPARE_READS_STAGE (templates/fit/model_api.h); 0 for the
     * model's own program. */
    unsigned held;
    int stage_width, rows_per_voxel, prepare_reads_stage;
    int pre_width;      /* DM_PRE_WIDTH: the values of dm_signal_prepare */
    int fix_base_width; /* DM_FIX_BASE_WIDTH: the fixed values that read no stage value */
    dm_param_info params[DM_MAX_PARAMS];
    dm_measure_info measures[16];
    dm_voxel_info voxels[16];
    dm_output_info outputs[32];
    char *source; /* the generated source, for the host compiler and NVRTC alike (malloc'd) */
} dm_model_info;

struct dm_model;
struct dm_flops;
/* Describes a checked model whose generated source is `source` and work counts `flops`
 * (dm_generate's results): every field but `source`, which stays NULL.  `what` names the
 * model in error messages.  0, or -1 when the model does not fit these arrays. */
int dm_model_describe(const struct dm_model *m, const struct dm_flops *flops, const char *source,
                      const char *what, dm_model_info *mi);
/* Resolves MODEL (a shipped name or a path to a .model file), compiles it in memory and fills
 * mi, source included.  Compiler diagnostics go to stderr.  0 or -1. */
int dm_model_load(const char *model, dm_model_info *mi);
/* The program of a stage that holds the parameters `held` of the model mi (loaded by
 * dm_model_load): *stage is mi with that program's source, fixed values and stage values, and
 * its work counts (dm_generate_stage).  0, or -1 with the error set. */
int dm_model_stage(const dm_model_info *mi, unsigned held, dm_model_info *stage);
void dm_model_info_free(dm_model_info *mi);
int dm_model_param_index(const dm_model_info *mi, const char *name);
/* The names of the shipped models (the .model files of the data folder's models/), sorted;
 * *names malloc'd, each name too.  The count (0 when none is found). */
int dm_shipped_models(char ***names);

#endif
