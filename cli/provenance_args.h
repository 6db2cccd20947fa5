/* A command's parsed options recorded in its provenance.json (provenance_args.c). */
#ifndef DIMOC_PROVENANCE_ARGS_H
#define DIMOC_PROVENANCE_ARGS_H

#include "args.h"
#include "util/json.h"

/* Options named in `inputs` (NULL-ended) go to "inputs", the others with a value to
 * "options", positional arguments to "inputs" as argument1, argument2, ...; --out is left out
 * (the file's own place says it). */
void dm_provenance_args(dm_provenance *p, const dm_args *a, const dm_opt *opts,
                        const char *const inputs[]);

#endif
