/* The pulsed-gradient timing of dimoc commit's cylinder model, read from a scheme file
 * (io/scheme_file.h: columns G, Delta, delta; Camino's STEJSKALTANNER layout names them so),
 * one row per volume, and checked against the b-values: b = (gamma G delta)^2 (Delta - delta/3)
 * with COMMIT's gamma (commit_kernels.h). */
#ifndef DIMOC_COMMIT_PULSES_H
#define DIMOC_COMMIT_PULSES_H

#include "commit/commit_kernels.h"

typedef struct dm_commit_pulse_table {
    double *G, *Delta, *delta; /* nvol each: T/m, s, s */
    dm_commit_pulses view;     /* pointers to the three */
} dm_commit_pulse_table;

/* 0, or -1 with one line naming the file: not readable, a missing column, a number of rows
 * other than nvol, a value that is not finite and >= 0 (delta > 0 and Delta >= delta where
 * G > 0), or a row whose b differs from bval's by more than 1% (and 1 s/mm^2). */
int dm_commit_pulses_read(const char *path, int nvol, const double *bval, dm_commit_pulse_table *p);
/* The same for nvol rows G Delta delta in memory (rows: nvol x 3), `name` naming them. */
int dm_commit_pulses_take(const char *name, int nvol, const double *rows, const double *bval,
                          dm_commit_pulse_table *p);
void dm_commit_pulses_free(dm_commit_pulse_table *p);

#endif
