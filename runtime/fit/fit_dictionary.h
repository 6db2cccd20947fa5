/* The dictionary stage of a fit (--method dictionary, templates/fit/dictionary.h), on the CPU. */
#ifndef DIMOC_FIT_DICTIONARY_H
#define DIMOC_FIT_DICTIONARY_H

#include "fit/fit_outputs.h"

/* Builds the dictionary from the model and the first voxel to fit, then fits every voxel
 * whose status is FITTED (in parallel, OpenMP; a progress line unless quiet), updating res
 * and the status map; describes the dictionary in note ("dictionary of 145 atoms, ...").  watch
 * (NULL: none) counts the voxels and may stop them.  0, or -1 with dm_last_error(). */
int dm_fit_dictionary_run(dm_problem *p, const dm_cpu_fitter *f, dm_fit_results *res, int quiet,
                          dm_fit_watch *watch, char *note, size_t size);

#endif
