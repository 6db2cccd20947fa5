/* The model's data-driven starts and its multi-start settings (fit_starts.c). */
#ifndef DIMOC_FIT_STARTS_H
#define DIMOC_FIT_STARTS_H

#include "fit/fit.h"

/* Fills p->start (nfit x P) by each parameter's rule: the constant, the mean b=0 signal, or a
 * value of the voxel's tensor fit (MD, an eigenvector's angles); the constant where a voxel
 * has no value for its rule (skipped voxels, a failed tensor fit: warned once).  Parameters
 * in `supplied` (bit k) are about to be set from --init or --init-from: they take their
 * constant, and no tensor is fitted for them alone.  Needs p->mi, M, meas, bvals, y, index
 * and status; it cannot fail. */
void dm_fit_starts(dm_problem *p, unsigned supplied);

/* Sets p->cfg.starts and the orientation pairs from the model's `multistart` and its
 * `init from theta(K) / phi(K)` pairs; one start when the user gave or fixed one of those
 * angles (user_starts: bit k, parameter k came from --init or --init-from). */
void dm_fit_multistart_config(dm_problem *p, unsigned user_starts);

#endif
