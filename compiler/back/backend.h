/* Internal interface of the back end.  generate.c (dm_generate) runs it, one way:
 *   programs.c  lowers a checked model into the programs of its functions (lower.h) and
 *               splits the signal and its gradient into per-voxel and per-measurement parts;
 *               stage.c makes a stage's held parameters constants of its program;
 *   emit.c      prints the programs as the generated source (templates/fit/model_api.h);
 *   flops.c     counts their work (dm_flops);
 *   meta.c      writes the metadata file (docs/metadata.md) from the model and the counts.
 * emit.c and meta.c write through buf.h; none of them calls another. */
#ifndef DIMOC_BACKEND_H
#define DIMOC_BACKEND_H

#include "buf.h"
#include "compiler.h"
#include "front/diag.h"
#include "lower.h"
#include "fit/model_api.h"

/* The programs of one model, or of one stage of a fit (held != 0). */
typedef struct dm_programs {
    dm_prog signal, grad, constraints, prior, outputs;
    int signal_root;
    int grad_roots[1 + DM_MAX_PARAMS]; /* value, then the partial of each parameter */
    int *constraint_roots;
    int prior_root;
    int *output_roots;
    dm_split signal_split, grad_split; /* per-voxel and per-measurement parts */
    /* A stage program's (stage.c): the parameters it holds (bit k: parameter k), and the
     * program of the values it appends to the voxel row (the signal as lowered), whose
     * stage_roots[0 .. nstage) are those values in column order. */
    unsigned held;
    dm_prog stage;
    int *stage_roots, nstage;
} dm_programs;

/* Builds every program, for a stage that holds the parameters `held` (0: the model's program,
 * for any fit); errors go to diag.  0 or -1; free with dm_programs_free either way. */
int dm_programs_build(dm_programs *G, const dm_model *m, unsigned held, dm_diag *diag);
void dm_programs_free(dm_programs *G);

/* stage.c: turns G->signal (lowered, root G->signal_root) into the stage program of `held`:
 * G->stage takes the lowered signal, G->signal the signal over the stage's values. */
void dm_stage_program(dm_programs *G, const dm_model *m, unsigned held);

/* The generated source (malloc'd). */
char *dm_emit_source(const dm_model *m, const dm_programs *G);

/* The work counts of the split signal and gradient. */
void dm_programs_flops(const dm_programs *G, dm_flops *f);

/* The metadata file (malloc'd) of a model whose generated source is `source`. */
char *dm_meta_text(const dm_model *m, const dm_flops *flops, const char *source);

#endif
