/* The C API's calls on arrays of 1.2 (include/dimoc.h) against the commands on files:
 * dimoc_simulate against `dimoc simulate` (constants over N x 1 x 1 voxels with Rician noise,
 * and an S0 map handed over in C order, strides the command's reader never makes): the signal
 * and the mask are the command's, value for value; a cancel stops it (DIMOC_E_CANCELLED, no
 * result) and the next call gives the same image.  dimoc_dti against `dimoc dti` on the
 * simulated image, handed over in C order (the volume fastest): every map of the command's
 * folder, with --iter 2 and --sse.  dimoc_csd (tournier's response) and dimoc_peaks on the same
 * image against `dimoc csd` and `dimoc peaks`: the FODs, the response's rows, the status and
 * the peak maps.  Wrong inputs are DIMOC_E_ARGUMENT naming the argument. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_check.h"
#include "check.h"
#include "dimoc.h"
#include "io/textio.h"
#include "io/volume.h"
#include "util/error.h"


static int read_image(const char *name, dm_volume *v)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return dm_volume_read(path, v);
}

/* The result's array `name` against the image file `file` (x fastest, volume last): the same
 * shape and values; a description of the first difference ("" when none). */
static const char *compare(const dimoc_result *res, const char *name, const char *file, char *why,
                           size_t size)
{
    why[0] = 0;
    const dimoc_result_array *a = dimoc_result_get(res, name);
    dm_volume v;
    if (!a) {
        snprintf(why, size, "no array %s", name);
        return why;
    }
    if (read_image(file, &v) != 0) {
        snprintf(why, size, "%s", dm_last_error());
        return why;
    }
    size_t n[4] = {(size_t)v.nx, (size_t)v.ny, (size_t)v.nz, (size_t)v.nt};
    for (int k = 0; k < a->array.ndim && !why[0]; k++)
        if (a->array.shape[k] != n[k])
            snprintf(why, size, "%s: %zu along axis %d, the file %zu", name, a->array.shape[k], k,
                     n[k]);
    for (size_t x = 0; x < n[0] && !why[0]; x++)
        for (size_t y = 0; y < n[1] && !why[0]; y++)
            for (size_t z = 0; z < n[2] && !why[0]; z++)
                for (size_t t = 0; t < n[3] && !why[0]; t++) {
                    const char *p = (const char *)a->array.data + x * a->array.strides[0] +
                                    y * a->array.strides[1] + z * a->array.strides[2] +
                                    (a->array.ndim > 3 ? t * a->array.strides[3] : 0);
                    double got = a->array.dtype == DIMOC_FLOAT32   ? *(const float *)p
                                 : a->array.dtype == DIMOC_FLOAT64 ? *(const double *)p
                                                                   : *(const unsigned char *)p;
                    double want = v.data[x + n[0] * (y + n[1] * (z + n[2] * t))];
                    if (got != want && !(isnan(got) && isnan(want)))
                        snprintf(why, size, "%s[%zu,%zu,%zu,%zu]: %.9g, the command's %.9g", name,
                                 x, y, z, t, got, want);
                }
    dm_volume_free(&v);
    return why;
}

static int cancel_after(void *user)
{
    int *polls = user;
    return ++*polls > 2;
}

int main(void)
{
    const char *tmp = getenv("TMPROOT") ? getenv("TMPROOT") : "/tmp";
    const char *program = getenv("DIMOC") ? getenv("DIMOC") : "bin/dimoc";
    snprintf(dir, sizeof dir, "%s/api_arrays", tmp);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    /* S0 as a map of 6 x 5 x 4 voxels (a ramp), the other parameters constants */
    dm_volume s0map = {0};
    double *ramp = malloc(120 * sizeof *ramp);
    for (int v = 0; v < 120; v++) ramp[v] = 700 + 5 * v;
    char s0path[1200];
    snprintf(s0path, sizeof s0path, "%s/S0.nii.gz", dir);
    int ok =
        system(cmd) == 0 &&
        run("'%s' scheme --shells 2x0,20x1000,20x2500 --bvals bvals --bvecs bvecs", program) == 0 &&
        dm_volume_write_new(s0path, 6, 5, 4, 1, 2.0, ramp) == 0 &&
        run("'%s' simulate ball_1_stick --bvals bvals --bvecs bvecs --voxels 150 --params "
            "S0=900,d=1.4e-3,f1=0.55,th1=1.1,ph1=2.3 --noise rician --snr 40 --seed 6 --out "
            "const.nii.gz --mask-out const_mask.nii.gz >/dev/null 2>&1",
            program) == 0 &&
        run("'%s' simulate ball_1_stick --bvals bvals --bvecs bvecs --params "
            "S0=S0.nii.gz,d=1.4e-3,f1=0.55,th1=1.1,ph1=2.3 --noise gaussian --snr 30 --out "
            "map.nii.gz --mask-out map_mask.nii.gz >/dev/null 2>&1",
            program) == 0 &&
        read_image("S0.nii.gz", &s0map) == 0;
    check(ok, "api-arrays-inputs", "the command failed, or the inputs could not be read: %s",
          dm_last_error());
    if (!ok) return 1;
    double *bvals, *bvecs;
    char bv[1200], bg[1200];
    snprintf(bv, sizeof bv, "%s/bvals", dir);
    snprintf(bg, sizeof bg, "%s/bvecs", dir);
    int M = 0;
    if (dm_read_bvals_bvecs(bv, bg, 0, &bvals, &bvecs, &M) != 0) return 1;
    dimoc_model *model = NULL;
    check(dimoc_model_open("ball_1_stick", &model) == DIMOC_OK, "api-arrays-model", "%s",
          dimoc_last_error()->message);

    /* ---- dimoc_simulate: constants ---- */
    double values[5] = {900, 1.4e-3, 0.55, 1.1, 2.3};
    const char *names[5] = {"S0", "d", "f1", "th1", "ph1"};
    dimoc_named_array params[5];
    for (int k = 0; k < 5; k++)
        params[k] = (dimoc_named_array){names[k], {&values[k], DIMOC_FLOAT64, 0, {0}, {0}}};
    dimoc_simulate_input in = DIMOC_SIMULATE_INPUT_INIT;
    in.nparams = 5;
    in.params = params;
    in.volumes = M;
    in.bvals = bvals;
    in.bvecs = bvecs;
    dimoc_simulate_options opt = DIMOC_SIMULATE_OPTIONS_INIT;
    opt.noise = "rician";
    opt.snr = 40;
    opt.seed = 6;
    opt.voxels = 150;
    opt.threads = 2;
    dimoc_result *res = NULL;
    char why[512];
    dimoc_status rc = dimoc_simulate(model, &in, &opt, NULL, &res);
    check(rc == DIMOC_OK && !compare(res, "signal", "const.nii.gz", why, sizeof why)[0] &&
              !compare(res, "mask", "const_mask.nii.gz", why, sizeof why)[0],
          "api-simulate-constants-equals-command", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? why : dimoc_last_error()->message);
    dimoc_result_free(res);

    /* ---- an S0 map in C order (z fastest) ---- */
    float *c_s0 = malloc(120 * sizeof *c_s0);
    for (int x = 0; x < 6; x++)
        for (int y = 0; y < 5; y++)
            for (int z = 0; z < 4; z++)
                c_s0[(x * 5 + y) * 4 + z] = (float)s0map.data[x + 6 * (y + 5 * z)];
    params[0].array = (dimoc_array){c_s0, DIMOC_FLOAT32, 3, {6, 5, 4}, {80, 16, 4}};
    dimoc_simulate_options gauss = DIMOC_SIMULATE_OPTIONS_INIT;
    gauss.noise = "gaussian";
    gauss.threads = 2;
    rc = dimoc_simulate(model, &in, &gauss, NULL, &res);
    check(rc == DIMOC_OK && !compare(res, "signal", "map.nii.gz", why, sizeof why)[0] &&
              !compare(res, "mask", "map_mask.nii.gz", why, sizeof why)[0],
          "api-simulate-map-equals-command", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? why : dimoc_last_error()->message);
    dimoc_result_free(res);

    /* ---- cancelled at its third poll; then the same call again ---- */
    dimoc_array s0_map = params[0].array;
    params[0].array = (dimoc_array){&values[0], DIMOC_FLOAT64, 0, {0}, {0}};
    int polls = 0;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    ctx.cancel = cancel_after;
    ctx.user = &polls;
    dimoc_simulate_options many = opt;
    many.voxels = 300000;
    rc = dimoc_simulate(model, &in, &many, &ctx, &res);
    check(rc == DIMOC_E_CANCELLED && !res && dimoc_last_error()->code == DIMOC_E_CANCELLED,
          "api-simulate-cancel", "%s after %d polls: %s", dimoc_status_name(rc), polls,
          dimoc_last_error()->message);
    rc = dimoc_simulate(model, &in, &opt, NULL, &res);
    check(rc == DIMOC_OK && !compare(res, "signal", "const.nii.gz", why, sizeof why)[0],
          "api-simulate-after-cancel", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? why : dimoc_last_error()->message);
    dimoc_result_free(res);

    /* ---- wrong inputs: DIMOC_E_ARGUMENT naming the argument ---- */
    unsigned char small_mask[4] = {1, 1, 1, 1};
    double *short_vecs = malloc((size_t)M * 3 * sizeof *short_vecs);
    memcpy(short_vecs, bvecs, (size_t)M * 3 * sizeof *short_vecs);
    for (int c = 0; c < 3; c++) short_vecs[3 * 5 + c] *= 0.5;
    struct {
        const char *label, *word;
        dimoc_simulate_input in;
        dimoc_simulate_options opt;
    } bad[6];
    params[0].array = s0_map;
    for (int i = 0; i < 6; i++) bad[i].in = in, bad[i].opt = gauss;
    bad[0].label = "api-simulate-refuses-missing-param", bad[0].word = "ph1";
    bad[0].in.nparams = 4;
    bad[1].label = "api-simulate-refuses-mask-grid", bad[1].word = "mask";
    bad[1].in.mask = (dimoc_array){small_mask, DIMOC_UINT8, 3, {4, 1, 1}, {1, 1, 1}};
    bad[2].label = "api-simulate-refuses-bvecs", bad[2].word = "bvecs";
    bad[2].in.bvecs = short_vecs;
    bad[3].label = "api-simulate-refuses-noise", bad[3].word = "noise";
    bad[3].opt.noise = "poisson";
    bad[4].label = "api-simulate-refuses-volumes", bad[4].word = "volumes";
    bad[4].in.volumes = 0;
    bad[5].label = "api-simulate-refuses-no-bvecs", bad[5].word = "bvecs";
    bad[5].in.bvecs = NULL;
    for (int i = 0; i < 6; i++) {
        res = NULL;
        rc = dimoc_simulate(model, &bad[i].in, &bad[i].opt, NULL, &res);
        const char *msg = dimoc_last_error()->message;
        check(rc == DIMOC_E_ARGUMENT && !res && strstr(msg, bad[i].word), bad[i].label, "%s: %s",
              dimoc_status_name(rc), msg);
        dimoc_result_free(res);
    }

    /* ---- dimoc_dti on the simulated image, in C order ---- */
    dm_volume dwi = {0};
    ok = read_image("const.nii.gz", &dwi) == 0 &&
         run("'%s' dti --data const.nii.gz --bvals bvals --bvecs bvecs --iter 2 --sse --out dti "
             ">/dev/null 2>&1",
             program) == 0;
    check(ok, "api-dti-inputs", "%s", dm_last_error());
    size_t nvox = DM_NVOX(&dwi), nt = (size_t)dwi.nt;
    float *c_dwi = malloc(nvox * nt * sizeof *c_dwi);
    for (size_t v = 0; ok && v < nvox; v++)
        for (size_t t = 0; t < nt; t++) c_dwi[v * nt + t] = (float)dwi.data[v + t * nvox];
    dimoc_dwi_input din = DIMOC_DWI_INPUT_INIT;
    din.data = (dimoc_array){c_dwi,
                             DIMOC_FLOAT32,
                             4,
                             {(size_t)dwi.nx, 1, 1, nt},
                             {(ptrdiff_t)(nt * 4), (ptrdiff_t)(nt * 4), (ptrdiff_t)(nt * 4), 4}};
    din.bvals = bvals;
    din.bvecs = bvecs;
    dimoc_dti_options dopt = DIMOC_DTI_OPTIONS_INIT;
    dopt.iter = 2;
    dopt.sse = 1;
    dopt.threads = 2;
    rc = dimoc_dti(&din, &dopt, NULL, &res);
    const char *maps[] = {"V1", "V2", "V3", "L1", "L2", "L3", "FA", "MD", "MO", "S0", "sse"};
    why[0] = 0;
    for (int k = 0; rc == DIMOC_OK && k < 11 && !why[0]; k++) {
        char file[64];
        snprintf(file, sizeof file, "dti/%s.nii.gz", maps[k]);
        compare(res, maps[k], file, why, sizeof why);
    }
    check(ok && rc == DIMOC_OK && !why[0] && dimoc_result_arrays(res, NULL) == 11 &&
              strstr(dimoc_result_provenance(res), "\"fitted\": 150"),
          "api-dti-equals-command", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? why : dimoc_last_error()->message);
    dimoc_result_free(res);
    struct {
        const char *label, *word;
        dimoc_dwi_input in;
        dimoc_dti_options opt;
    } dbad[4];
    for (int i = 0; i < 4; i++) dbad[i].in = din, dbad[i].opt = dopt;
    dbad[0].label = "api-dti-refuses-3d-data", dbad[0].word = "data";
    dbad[0].in.data.ndim = 3;
    dbad[1].label = "api-dti-refuses-mask-grid", dbad[1].word = "mask";
    dbad[1].in.mask = (dimoc_array){small_mask, DIMOC_UINT8, 3, {4, 1, 1}, {1, 1, 1}};
    dbad[2].label = "api-dti-refuses-method", dbad[2].word = "method";
    dbad[2].opt.method = "nlls";
    dbad[3].label = "api-dti-refuses-bvecs", dbad[3].word = "bvecs";
    dbad[3].in.bvecs = short_vecs;
    for (int i = 0; i < 4; i++) {
        res = NULL;
        rc = dimoc_dti(&dbad[i].in, &dbad[i].opt, NULL, &res);
        const char *msg = dimoc_last_error()->message;
        check(rc == DIMOC_E_ARGUMENT && !res && strstr(msg, dbad[i].word), dbad[i].label, "%s: %s",
              dimoc_status_name(rc), msg);
        dimoc_result_free(res);
    }

    /* ---- dimoc_csd with tournier's response, then dimoc_peaks on its FOD ---- */
    ok = run("'%s' csd --data const.nii.gz --bvals bvals --bvecs bvecs --algorithm tournier "
             "--threads 2 --out csd >/dev/null 2>&1 && '%s' peaks csd/wm_fod.nii.gz --threads 2 "
             "--out peaks >/dev/null",
             program, program) == 0;
    dimoc_csd_options copt = DIMOC_CSD_OPTIONS_INIT;
    copt.algorithm = "tournier";
    copt.device = "cpu";
    copt.threads = 2;
    rc = dimoc_csd(&din, &copt, NULL, &res);
    why[0] = 0;
    const char *cmaps[] = {"wm_fod", "status", "wm_voxels"};
    for (int k = 0; rc == DIMOC_OK && k < 3 && !why[0]; k++) {
        char file[64];
        snprintf(file, sizeof file, "csd/%s.nii.gz", cmaps[k]);
        compare(res, cmaps[k], file, why, sizeof why);
    }
    if (rc == DIMOC_OK && !why[0]) { /* the response's rows as the file prints them */
        const dimoc_result_array *wr = dimoc_result_get(res, "wm_response");
        char path[1200], line[4096], want[4096] = "", got[4096] = "";
        snprintf(path, sizeof path, "%s/csd/wm_response.txt", dir);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (line[0] != '#') strncat(want, line, sizeof want - strlen(want) - 1);
        if (f) fclose(f);
        for (size_t s = 0; wr && s < wr->array.shape[0]; s++)
            for (size_t c = 0; c < wr->array.shape[1]; c++) {
                size_t n = strlen(got);
                snprintf(got + n, sizeof got - n, "%.15g%s",
                         ((const double *)wr->array.data)[s * wr->array.shape[1] + c],
                         c + 1 == wr->array.shape[1] ? "\n" : " ");
            }
        if (strcmp(got, want))
            snprintf(why, sizeof why, "wm_response: %s, the file's %s", got, want);
    }
    check(ok && rc == DIMOC_OK && !why[0], "api-csd-equals-command", "%s: %s",
          dimoc_status_name(rc), rc == DIMOC_OK ? why : dimoc_last_error()->message);
    if (rc == DIMOC_OK) {
        const dimoc_result_array *fod = dimoc_result_get(res, "wm_fod");
        dimoc_peaks_input pin = DIMOC_PEAKS_INPUT_INIT;
        pin.fod = fod->array;
        dimoc_peaks_options popt = DIMOC_PEAKS_OPTIONS_INIT;
        popt.threads = 2;
        dimoc_result *pres = NULL;
        dimoc_status prc = dimoc_peaks(&pin, &popt, NULL, &pres);
        why[0] = 0;
        const char *pmaps[] = {"peaks", "dyads1", "peak_amp1", "dyads3"};
        for (int k = 0; prc == DIMOC_OK && k < 4 && !why[0]; k++) {
            char file[64];
            snprintf(file, sizeof file, "peaks/%s.nii.gz", pmaps[k]);
            compare(pres, pmaps[k], file, why, sizeof why);
        }
        check(prc == DIMOC_OK && !why[0], "api-peaks-equals-command", "%s: %s",
              dimoc_status_name(prc), prc == DIMOC_OK ? why : dimoc_last_error()->message);
        dimoc_result_free(pres);
    }
    dimoc_result_free(res);
    copt.lmax = 7;
    rc = dimoc_csd(&din, &copt, NULL, &res);
    check(rc == DIMOC_E_ARGUMENT && !res && strstr(dimoc_last_error()->message, "lmax"),
          "api-csd-refuses-lmax", "%s: %s", dimoc_status_name(rc), dimoc_last_error()->message);
    free(c_dwi);
    dm_volume_free(&dwi);
    free(short_vecs);
    free(c_s0);
    free(ramp);
    dm_volume_free(&s0map);
    dimoc_model_free(model);
    free(bvals);
    free(bvecs);
    return failures != 0;
}
