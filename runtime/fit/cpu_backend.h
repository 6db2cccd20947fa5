/* The CPU backend: the host C compiler builds the generated model and the fitting templates
 * into a shared object once, cached by content hash, and the runtime calls it through dlopen. */
#ifndef DIMOC_CPU_BACKEND_H
#define DIMOC_CPU_BACKEND_H

#include "fit/fit_api.h"
#include "model/model_info.h"

typedef struct dm_cpu_fitter {
    void *handle;
    dm_fit_voxel_fn fit_voxel;
    dm_fit_work_new_fn work_new; /* a thread's workspace for fit_voxel */
    dm_fit_work_free_fn work_free;
    dm_predict_fn predict;
    dm_derived_fn derived;
    dm_derived_rows_fn derived_rows; /* derived of many parameter rows, vectorised across them */
    dm_dict_build_fn dict_build; /* the dictionary fit (templates/fit/dictionary.h) */
    dm_dict_fit_fn dict_fit;
    dm_dict_free_fn dict_free;
    int real_size;          /* 4 (float) or 8 (double) */
    double compile_seconds; /* 0 when found in the cache; the wait when another process compiled it */
    char so_path[4096];
} dm_cpu_fitter;

/* Builds (or finds in the cache) and loads the fitter of `mi` in the given precision.
 * Cache: $XDG_CACHE_HOME/dimoc, else ~/.cache/dimoc; the key hashes the generated source,
 * every template file, the compiler command and the host CPU model.  0 or -1. */
int dm_cpu_fitter_load(const dm_model_info *mi, int real_size, dm_cpu_fitter *f);
void dm_cpu_fitter_close(dm_cpu_fitter *f);

#endif
