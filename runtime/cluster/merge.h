/* `dimoc merge`: joins the output folders of the N parts of one command (each run with
 * --part K/N, each holding a part.json manifest: cluster/part.h) into the folder one process would
 * have written, byte for byte but for provenance.json. */
#ifndef DIMOC_MERGE_H
#define DIMOC_MERGE_H

/* Checks the folders first (every part 1..N present once, finished, of the same command, the
 * same files), then writes `out` whole or not at all.  0, or -1 with dm_last_error() naming
 * the missing part or the folder and file at fault. */
int dm_merge_parts(char *const dirs[], int ndirs, const char *out, int quiet);

#endif
