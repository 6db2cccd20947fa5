/* A pipeline's stages as one process runs them: the plan that pipelines/lib/flags.bash writes
 * in its plan phase (lines "stage NAME CMD OUT PRE POST" and "finish NAME DEPTH SCRIPT ARGS",
 * words quoted by bash's printf %q) read back into command lines, or the stages of the
 * pipelines that have no script (csd: dimoc response --algorithm dhollander, then dimoc csd;
 * tractography: the same, then dimoc track --fod). */
#ifndef DIMOC_STUDY_PLAN_H
#define DIMOC_STUDY_PLAN_H

typedef struct dm_study_stage {
    int finish;  /* 0: a dimoc command; 1: a nested pipeline's closing work (bash, see
                  * flags.bash: DIMOC_FINISH_DEPTH) */
    int depth;   /* finish: the script's depth */
    char *name;  /* the stage's name ("final", "dti", ...) */
    char *cmd;   /* the dimoc command ("fit", "dti"); finish: the script's path */
    char *out;   /* the command's --out ("" none) */
    char **argv; /* NULL-ended: the command and its words ("fit" "noddi_dti" "--data" ...,
                  * with "--out" OUT where the script put it); finish: the script's words */
    int argc;
} dm_study_stage;

typedef struct dm_study_plan {
    dm_study_stage *stage;
    int n;
} dm_study_plan;

/* Reads a plan file.  0, or -1 with dm_last_error() naming the file and line. */
int dm_study_plan_read(const char *path, dm_study_plan *plan);

/* The inputs of one run of a pipeline. */
typedef struct dm_study_inputs {
    const char *dwi, *bval, *bvec, *mask;
    const char *out; /* the pipeline's --out: its stages go under OUT/dimoc/ */
} dm_study_inputs;

/* The stages of `csd` or `tractography` for one run.  opts: the user's options as words
 * ("--lmax" "6" ...): --threads and --format go to every command, --device and --gpus to csd
 * and track, --lmax to csd, --select to track.  Several diffusion-weighted shells make the
 * deconvolution multi-tissue (WM, GM, CSF responses).  0, or -1 with dm_last_error(). */
int dm_study_plan_builtin(const char *pipeline, const dm_study_inputs *in, char *const *opts,
                          int nopts, dm_study_plan *plan);
/* 1 when `name` is a pipeline without a script (csd, tractography). */
int dm_study_builtin_pipeline(const char *name);

void dm_study_plan_free(dm_study_plan *plan);

/* Splits a line of words quoted as bash's printf %q quotes them (backslash escapes, '...',
 * $'...' with C escapes) into *words (malloc'd, NULL-ended); their count, or -1 with
 * dm_last_error() on an unterminated quote. */
int dm_shell_unquote(const char *line, char ***words);

#endif
