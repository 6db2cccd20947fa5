/* The file side of `dimoc commit` (commit_run.h's engine reads and writes none): the command's
 * inputs read from its files, as a source the run calls where it needs each, on threads of
 * its own where they were before; COMMIT's outputs written into --out by a sink, beside the
 * error maps' computing; and the dictionary stage (--stage dictionary, --part), saved apart
 * and read back by --dictionary. */
#ifndef DIMOC_COMMIT_FILES_H
#define DIMOC_COMMIT_FILES_H

#include "commit_run/commit_options.h"
#include "util/json.h"

/* 0, or -1 with one error line (a bad input names its file); nothing is written then. */
int dm_commit_command(const dm_commit_options *o, dm_provenance *prov, dm_commit_summary *s);

#endif
