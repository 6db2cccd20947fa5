/* The model's data-driven starts and its multi-start settings (fit_starts.c). */
#ifndef DIMOC_FIT_STARTS_H
#define DIMOC_FIT_STARTS_H

#include "fit/fit.h"

/* Plans p->start (nfit x P) by each parameter's rule: the constant now; the mean b=0 signal
 * or a value of the voxel's tensor fit (MD, an eigenvector's angles) left pending in
 * p->starts for dm_fit_starts_fill.  Parameters in `supplied` (bit k) are about to be set from
 * --init or --init-from: they take their constant, and no tensor is fitted for them alone.
 * Needs p->mi, M, meas, bvals, y, index and status; it cannot fail. */
void dm_fit_starts(dm_problem *p, unsigned supplied);

/* Makes the pending starts (each clamped into its bounds; the constant where a voxel has no
 * value for its rule: a skipped voxel, a failed tensor fit), here on all threads. */
void dm_fit_starts_fill(dm_problem *p);
/* Makes them on a thread of its own, in chunks of voxels taken in fit order by its team;
 * dm_fit_starts_wait(p, end) returns once voxels [0, end) have theirs.  Both return at once
 * when nothing is pending. */
void dm_fit_starts_begin(dm_problem *p);
void dm_fit_starts_wait(dm_problem *p, size_t end);

/* Ends the plan (its thread stopped: voxels not reached keep their constants), warns once of
 * failed tensor fits and frees it.  Returns the seconds the starts were made in (their thread's
 * time, to its end or its stop; 0 when none were pending). */
double dm_fit_starts_finish(dm_problem *p);

/* v moved inside parameter x's bounds (an open bound by 1e-6 of the range). */
double dm_fit_clamp_start(const dm_param_info *x, double v);

/* Sets p->cfg.starts and the orientation pairs from the model's `multistart` and its
 * `init from theta(K) / phi(K)` pairs; one start when the user gave or fixed one of those
 * angles (user_starts: bit k, parameter k came from --init or --init-from). */
void dm_fit_multistart_config(dm_problem *p, unsigned user_starts);

#endif
