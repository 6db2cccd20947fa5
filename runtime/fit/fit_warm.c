/* dimoc warm: the fitters compiled into the caches before the first fit needs them. */
#include "fit/cpu_backend.h"
#include "fit/fit.h"
#include "fit/fit_gpu.h"
#include "gpu/cuda_api.h"
#include "gpu/gpu_device.h"
#include "model/model_info.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/paths.h"
#include "util/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void report(const dm_warm_request *r, const char *model, const char *where, int real_size,
                   int lanes, double seconds, int cached)
{
    if (r->quiet) return;
    char what[32] = "";
    if (lanes) snprintf(what, sizeof what, ", %d lanes", lanes);
    if (cached)
        printf("%-22s %s %s%s: in the cache\n", model, where, real_size == 4 ? "float" : "double",
               what);
    else
        printf("%-22s %s %s%s: compiled in %.1f s\n", model, where,
               real_size == 4 ? "float" : "double", what, seconds);
    fflush(stdout);
}

static const char *method_names(int methods)
{
    static const char *const names[8] = {"",     "grid",      "lm",      "grid,lm",
                                         "mcmc", "grid,mcmc", "lm,mcmc", "grid,lm,mcmc"};
    return names[methods & 7];
}

static int warm_model(const dm_warm_request *r, const char *name, const dm_cuda *cu,
                      const dm_gpu_set *gs)
{
    dm_model_info mi;
    if (dm_model_load(name, &mi) != 0) {
        dm_model_info_free(&mi);
        return -1;
    }
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        int rs = r->real_size[k];
        if (!rs) continue;
        if (r->cpu) {
            dm_cpu_fitter f;
            double t0 = dm_now_seconds();
            rc = dm_cpu_fitter_load(&mi, rs, &f);
            if (rc == 0)
                report(r, mi.name, "cpu", rs, 0, dm_now_seconds() - t0, f.compile_seconds == 0);
            dm_cpu_fitter_close(&f);
        }
        /* A GPU fitter holds the methods of its run: by default those of the pipelines'
         * stages (a grid, LM, LM then MCMC). */
        const int usual[] = {DM_METHOD_GRID, DM_METHOD_LM, DM_METHOD_LM | DM_METHOD_MCMC};
        const int *sets = r->methods ? &r->methods : usual;
        const int nsets = r->methods ? 1 : 3;
        for (int s = 0; s < nsets && rc == 0 && cu; s++) {
            int methods = sets[s];
            int lanes = r->lanes > 0 ? r->lanes : dm_fit_gpu_auto_lanes(r->measurements, rs);
            dm_fit_gpu_programs progs;
            rc = dm_fit_gpu_compile_parts(cu, &mi, gs->arch, rs, lanes, methods, DM_NOISE_GAUSSIAN,
                                          1, &progs); /* MCMC's default */
            if (rc == 0) {
                char where[80];
                snprintf(where, sizeof where, "gpu sm_%d %s", gs->arch, method_names(methods));
                report(r, mi.name, where, rs, lanes, progs.compile_seconds, progs.cached);
                dm_fit_gpu_programs_free(&progs);
            }
        }
        if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
    }
    dm_model_info_free(&mi);
    return rc;
}

int dm_fit_warm(const dm_warm_request *r)
{
    char **shipped = NULL;
    int n = r->nmodels;
    char **names = r->models;
    if (!names) {
        n = dm_shipped_models(&shipped);
        names = shipped;
        if (n == 0) return dm_set_error("warm: no shipped model found beside the program");
    }
    int rc = 0;
    /* every model first, before any compiling: a misspelt name stops nothing half-way */
    for (int i = 0; i < n && rc == 0 && !shipped; i++) {
        size_t len = strlen(names[i]);
        int file = strchr(names[i], '/') || (len > 6 && !strcmp(names[i] + len - 6, ".model"));
        char *path = file ? NULL : dm_shipped_model_path(names[i]);
        if (file ? access(names[i], R_OK) != 0 : !path)
            rc = file ? dm_set_error("%s: cannot read model file", names[i])
                      : dm_set_error("unknown model '%s': not a shipped model (see 'dimoc "
                                     "info') and not a path to a .model file",
                                     names[i]);
        free(path);
    }
    dm_cuda *cu = NULL;
    dm_gpu_set gs = {0};
    if (rc == 0 && r->gpu) {
        cu = dm_cuda_open(1, 1);
        if (!cu || dm_gpu_select(cu, "all", &gs) != 0) rc = -1;
    }
    for (int i = 0; i < n && rc == 0; i++) rc = warm_model(r, names[i], cu, &gs);
    if (cu) dm_cuda_close(cu);
    for (int i = 0; shipped && i < n; i++) free(shipped[i]);
    free(shipped);
    return rc;
}
