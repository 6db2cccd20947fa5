/* dimoc commit: COMMIT's tractogram filtering end to end (commit_run.c).  Stages (each timed in
 * the provenance): load (data, mask, scheme, tractogram, peaks: from a source, commit_inputs.h),
 * dictionary (commit/commit_dict.c), kernels (commit/commit_kernels.c), operator
 * (commit/commit_operator.c), solve (commit/commit_solve.c: FISTA with the products on host
 * threads or a GPU), outputs (commit_outputs.c) for a sink.  The command (commit_files.h) reads
 * its files and writes COMMIT's outputs in --out; the C API hands over arrays and keeps the
 * outputs in memory: the same run. */
#ifndef DIMOC_COMMIT_RUN_H
#define DIMOC_COMMIT_RUN_H

#include "commit_run/commit_inputs.h"
#include "commit_run/commit_options.h"
#include "commit_run/commit_outputs.h"
#include "util/json.h"
#include "util/progress.h"

/* The whole fit of o's stage "all" on what src hands over, its outputs to sink and its results
 * into prov and sum.  watch (NULL: none) takes the stages' progress ("load", "dictionary",
 * "solve", "debias", "outputs") and a caller's cancel, polled between stages and the solver's
 * iterations.  0, or -1 with one error line (a bad input names it). */
int dm_commit_run(const dm_commit_options *o, const dm_commit_source *src,
                  const dm_commit_sink *sink, dm_watch *watch, dm_provenance *prov,
                  dm_commit_summary *sum);

#endif
