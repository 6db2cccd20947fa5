/* dimoc_fit (include/dimoc.h) on arrays against `dimoc fit` on files: data simulated by
 * `dimoc simulate`, fitted by the command, and by the API from a float32 copy of the image in
 * C order (x, y, z, volume with the volume fastest: strides the command's reader never uses);
 * every map and the status are the command's, value for value (LM, and LM then MCMC with its
 * samples).  The context's cancel stops a fit (DIMOC_E_CANCELLED, no result) and the next fit
 * gives the same maps; both callbacks run on the calling thread; --threads is given back.
 * Wrong inputs are DIMOC_E_ARGUMENT naming the argument. */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_check.h"
#include "check.h"
#include "dimoc.h"
#include "io/textio.h"
#include "io/volume.h"
#include "util/error.h"

static const char *program;

/* The inputs, as a caller holding arrays has them. */
static dm_volume image;
static float *cdata; /* X x Y x Z x M, the volume fastest */
static double *bvals, *bvecs;
static int M;

static int load_inputs(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/sim.nii.gz", dir);
    if (dm_volume_read(path, &image) != 0) return -1;
    M = image.nt;
    size_t nvox = DM_NVOX(&image);
    cdata = malloc(nvox * M * sizeof *cdata);
    for (int x = 0; x < image.nx; x++)
        for (int y = 0; y < image.ny; y++)
            for (int z = 0; z < image.nz; z++)
                for (int t = 0; t < M; t++) {
                    size_t v = x + (size_t)image.nx * (y + (size_t)image.ny * z);
                    cdata[(((size_t)x * image.ny + y) * image.nz + z) * M + t] =
                        (float)image.data[v + t * nvox];
                }
    char bv[1200], bg[1200];
    snprintf(bv, sizeof bv, "%s/bvals", dir);
    snprintf(bg, sizeof bg, "%s/bvecs", dir);
    int n;
    return dm_read_bvals_bvecs(bv, bg, M, &bvals, &bvecs, &n);
}

static dimoc_fit_input inputs(void)
{
    dimoc_fit_input in = DIMOC_FIT_INPUT_INIT;
    in.data = (dimoc_array){cdata,
                            DIMOC_FLOAT32,
                            4,
                            {image.nx, image.ny, image.nz, M},
                            {(ptrdiff_t)((size_t)image.ny * image.nz * M * 4),
                             (ptrdiff_t)((size_t)image.nz * M * 4), (ptrdiff_t)(M * 4), 4}};
    in.bvals = bvals;
    in.bvecs = bvecs;
    return in;
}

/* Every map of the command's folder `out` against the result's: the same names, values and
 * volumes; returns a description of the first difference ("" when none). */
static const char *compare(const dimoc_fit_result *res, const char *out, char *why, size_t size)
{
    const dimoc_fit_map *const *maps;
    int n = dimoc_fit_result_maps(res, &maps);
    why[0] = 0;
    char cmd[1500];
    snprintf(cmd, sizeof cmd, "ls '%s/%s' | grep -c 'nii.gz$'", dir, out);
    FILE *ls = popen(cmd, "r");
    int files = 0;
    if (!ls || fscanf(ls, "%d", &files) != 1) files = -1;
    if (ls) pclose(ls);
    if (files != n) snprintf(why, size, "%d maps, %d files", n, files);
    for (int i = 0; i < n && !why[0]; i++) {
        char path[1500];
        snprintf(path, sizeof path, "%s/%s/%s.nii.gz", dir, out, maps[i]->name);
        dm_volume v;
        if (dm_volume_read(path, &v) != 0) {
            snprintf(why, size, "%s: %s", maps[i]->name, dm_last_error());
            break;
        }
        size_t count = DM_NVOX(&v) * v.nt;
        if (v.nt != maps[i]->volumes || maps[i]->shape[0] != (size_t)v.nx)
            snprintf(why, size, "%s: %d volumes, the file %d", maps[i]->name, maps[i]->volumes,
                     v.nt);
        for (size_t k = 0; k < count && !why[0]; k++) {
            double got = maps[i]->dtype == DIMOC_FLOAT32   ? ((const float *)maps[i]->data)[k]
                         : maps[i]->dtype == DIMOC_FLOAT64 ? ((const double *)maps[i]->data)[k]
                                                           : ((const unsigned char *)
                                                                  maps[i]->data)[k];
            if (got != v.data[k])
                snprintf(why, size, "%s[%zu]: %.9g, the command's %.9g", maps[i]->name, k, got,
                         v.data[k]);
        }
        dm_volume_free(&v);
    }
    return why;
}


int main(void)
{
    const char *tmp = getenv("TMPROOT") ? getenv("TMPROOT") : "/tmp";
    program = getenv("DIMOC") ? getenv("DIMOC") : "bin/dimoc";
    snprintf(dir, sizeof dir, "%s/api_fit", tmp);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    int ok = system(cmd) == 0 &&
             run("'%s' scheme --shells 2x0,20x1000,20x2500 --bvals bvals --bvecs bvecs",
                 program) == 0 &&
             run("'%s' simulate ball_1_stick --bvals bvals --bvecs bvecs --voxels 150 --params "
                 "S0=900,d=1.4e-3,f1=0.55,th1=1.1,ph1=2.3 --noise rician --snr 40 --out "
                 "sim.nii.gz >/dev/null 2>&1",
                 program) == 0 &&
             run("'%s' fit ball_1_stick --data sim.nii.gz --bvals bvals --bvecs bvecs --out lm "
                 "--quiet --threads 2",
                 program) == 0 &&
             run("'%s' fit ball_1_stick --data sim.nii.gz --bvals bvals --bvecs bvecs --out "
                 "mcmc --quiet --threads 2 --method lm,mcmc --burnin 50 --jumps 100 "
                 "--sample-every 10 --seed 5 --save-samples",
                 program) == 0 &&
             load_inputs() == 0;
    check(ok, "api-fit-inputs", "the command failed, or the inputs could not be read: %s",
          dm_last_error());
    if (!ok) return 1;
    dimoc_model *model = NULL;
    check(dimoc_model_open("ball_1_stick", &model) == DIMOC_OK, "api-fit-model", "%s",
          dimoc_last_error()->message);

    /* LM, the callbacks on this thread, --threads given back */
    dimoc_fit_input in = inputs();
    dimoc_fit_options opt = DIMOC_FIT_OPTIONS_INIT;
    opt.threads = 2;
    seen s = {pthread_self(), 0, 0, 0, -1, ""};
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    ctx.progress = on_progress;
    ctx.cancel = on_cancel;
    ctx.user = &s;
    int threads = omp_get_max_threads();
    dimoc_fit_result *res = NULL;
    dimoc_status rc = dimoc_fit(model, &in, &opt, &ctx, &res);
    char why[512];
    check(rc == DIMOC_OK && !compare(res, "lm", why, sizeof why)[0], "api-fit-lm-equals-command",
          "%s: %s", dimoc_status_name(rc), rc == DIMOC_OK ? why : dimoc_last_error()->message);
    check(s.progress > 3 && s.cancels > 0 && !s.off_thread && !strcmp(s.last_stage, "outputs"),
          "api-fit-callbacks-on-calling-thread", "%d progress, %d cancel polls, %d elsewhere, last %s",
          s.progress, s.cancels, s.off_thread, s.last_stage);
    check(omp_get_max_threads() == threads, "api-fit-threads-given-back", "%d, was %d",
          omp_get_max_threads(), threads);
    const char *prov = dimoc_fit_result_provenance(res);
    check(prov && strstr(prov, "\"method\": \"lm\"") && strstr(prov, "\"fitted\": 150"),
          "api-fit-provenance", "%.300s", prov ? prov : "(none)");
    dimoc_fit_result_free(res);

    /* LM then MCMC, with the samples */
    dimoc_fit_options mc = DIMOC_FIT_OPTIONS_INIT;
    mc.method = "lm,mcmc";
    mc.burnin = 50;
    mc.jumps = 100;
    mc.sample_every = 10;
    mc.seed = 5;
    mc.save_samples = 1;
    mc.threads = 2;
    rc = dimoc_fit(model, &in, &mc, NULL, &res);
    check(rc == DIMOC_OK && !compare(res, "mcmc", why, sizeof why)[0],
          "api-fit-mcmc-equals-command", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? why : dimoc_last_error()->message);
    dimoc_fit_result_free(res);

    /* cancelled after a few polls; then the same fit again */
    dimoc_fit_options longer = mc;
    longer.burnin = 20000;
    s = (seen){pthread_self(), 0, 0, 0, 3, ""};
    rc = dimoc_fit(model, &in, &longer, &ctx, &res);
    check(rc == DIMOC_E_CANCELLED && !res && dimoc_last_error()->code == DIMOC_E_CANCELLED &&
              s.cancels == 4,
          "api-fit-cancel", "%s, %d polls: %s", dimoc_status_name(rc), s.cancels,
          dimoc_last_error()->message);
    rc = dimoc_fit(model, &in, &opt, NULL, &res);
    check(rc == DIMOC_OK && !compare(res, "lm", why, sizeof why)[0], "api-fit-after-cancel",
          "%s: %s", dimoc_status_name(rc), rc == DIMOC_OK ? why : dimoc_last_error()->message);
    dimoc_fit_result_free(res);

    /* wrong inputs: DIMOC_E_ARGUMENT naming the argument */
    struct {
        const char *label, *word;
        dimoc_fit_input in;
        dimoc_fit_options opt;
    } bad[8];
    int nbad = 0;
    double *short_vecs = malloc((size_t)M * 3 * sizeof *short_vecs);
    memcpy(short_vecs, bvecs, (size_t)M * 3 * sizeof *short_vecs);
    for (int j = 0; j < M; j++)
        if (bvals[j] > 0) {
            for (int c = 0; c < 3; c++) short_vecs[3 * j + c] *= 0.5;
            break;
        }
    unsigned char small_mask[4] = {1, 1, 1, 1};
    double f_init = 3;
    dimoc_named_array init = {"f1", {&f_init, DIMOC_FLOAT64, 0, {0}, {0}}};
    for (int i = 0; i < 8; i++) {
        bad[i].in = inputs();
        bad[i].opt = (dimoc_fit_options)DIMOC_FIT_OPTIONS_INIT;
    }
    bad[nbad].label = "api-fit-refuses-no-data", bad[nbad].word = "data";
    bad[nbad++].in.data.data = NULL;
    bad[nbad].label = "api-fit-refuses-3d-data", bad[nbad].word = "data";
    bad[nbad++].in.data.ndim = 3;
    bad[nbad].label = "api-fit-refuses-mask-grid", bad[nbad].word = "mask";
    bad[nbad++].in.mask = (dimoc_array){small_mask, DIMOC_UINT8, 3, {4, 1, 1}, {1, 1, 1}};
    bad[nbad].label = "api-fit-refuses-bvecs", bad[nbad].word = "bvecs";
    bad[nbad++].in.bvecs = short_vecs;
    bad[nbad].label = "api-fit-refuses-no-bvecs", bad[nbad].word = "bvecs";
    bad[nbad++].in.bvecs = NULL;
    bad[nbad].label = "api-fit-refuses-init", bad[nbad].word = "init f1";
    bad[nbad].opt.ninit = 1;
    bad[nbad++].opt.init = &init;
    bad[nbad].label = "api-fit-refuses-precision", bad[nbad].word = "precision";
    bad[nbad++].opt.precision = "half";
    bad[nbad].label = "api-fit-refuses-method", bad[nbad].word = "method";
    bad[nbad++].opt.method = "lbfgs";
    for (int i = 0; i < nbad; i++) {
        res = NULL;
        rc = dimoc_fit(model, &bad[i].in, &bad[i].opt, NULL, &res);
        const char *msg = dimoc_last_error()->message;
        check(rc == DIMOC_E_ARGUMENT && !res && strstr(msg, bad[i].word), bad[i].label, "%s: %s",
              dimoc_status_name(rc), msg);
        dimoc_fit_result_free(res);
    }
    free(short_vecs);
    dimoc_model_free(model);
    free(cdata);
    free(bvals);
    free(bvecs);
    dm_volume_free(&image);
    return failures != 0;
}
