/* dimoc commit: COMMIT's tractogram filtering end to end (commit_run.c).  Stages (each timed in
 * the provenance): load (data, mask, scheme, tractogram, peaks: commit_inputs.c), dictionary
 * (commit/commit_dict.c), kernels (commit/commit_kernels.c), operator (commit/commit_operator.c),
 * solve (commit/commit_solve.c: FISTA with the products on host threads or a GPU), write:
 * COMMIT's outputs in --out (commit_outputs.c).  The dictionary may run alone, in parts, and be
 * saved (commit/commit_dictfile.h), and a later run take it from its folder. */
#ifndef DIMOC_COMMIT_RUN_H
#define DIMOC_COMMIT_RUN_H

#include "commit_run/commit_options.h"
#include "util/json.h"

/* 0, or -1 with one error line (a bad input names its file). */
int dm_commit_command(const dm_commit_options *o, dm_provenance *prov, dm_commit_summary *s);

#endif
