/* dimoc dti: the linear diffusion-tensor fit (runtime/dti_fit.c) over an image, with the maps
 * named as FSL's dtifit names them. */
#include "args.h"
#include "cli.h"
#include "dti/dti_fit.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/textio.h"
#include "io/volume.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt dti_opts[] = {
    {"data", "FILE", NULL, "4D diffusion-weighted image (NIfTI)"},
    {"bvals", "FILE", NULL, "FSL b-values (s/mm^2), one per volume"},
    {"bvecs", "FILE", NULL, "FSL gradient directions, one per volume"},
    {"mask", "FILE", NULL, "3D mask on the data's grid: fit where non-zero (default: every voxel)"},
    {"out", "DIR", NULL, "output folder (created when missing)"},
    {"method", "wls|ols", "wls", "wls: OLS, then least squares weighted by the OLS-predicted "
                                 "signal squared; ols: ordinary least squares of log(S)"},
    {"min-signal", "X", "1e-4", "signals below X (zero, negative) are raised to X before the log"},
    {"min-diffusivity", "X", "auto",
     "eigenvalues below X are raised to X (as DIPY does); auto: 1e-6 / max(b g_i g_j), about "
     "1e-6 / max b; none: keep negative eigenvalues (as FSL's dtifit)"},
    {"prefix", "TEXT", NULL, "put TEXT before every map name (e.g. dti_ for FSL's dti_FA)"},
    {"save-tensor", NULL, NULL, "also write tensor.nii.gz: Dxx Dxy Dxz Dyy Dyz Dzz (FSL's order)"},
    {"sse", NULL, NULL, "also write sse.nii.gz: sum of squared errors of the predicted signal"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_dti(FILE *out)
{
    dm_args_help(out, "dimoc dti --data F --bvals F --bvecs F [--mask F] --out DIR [options]",
                 "Fits the diffusion tensor log S = log S0 - b g'Dg in every voxel by linear least\n"
                 "squares, as FSL's dtifit --wls and DIPY's TensorModel(fit_method='WLS') do, and\n"
                 "writes FSL's names: V1 V2 V3 (eigenvectors, 3 volumes each, in the frame of the\n"
                 "bvecs), L1 L2 L3 (eigenvalues, descending), FA, MD (mean diffusivity), MO (mode,\n"
                 "Ennis & Kindlmann 2006: -1 planar .. +1 linear) and S0, as .nii.gz with the data's\n"
                 "geometry.  Diffusivities are in the inverse units of the b-values (mm^2/s for\n"
                 "s/mm^2).  Voxels whose signal holds NaN/Inf, or is all zero, are skipped (maps 0).\n"
                 "For the non-linear tensor fit use 'dimoc fit dti' (models/dti.model).",
                 dti_opts);
    return 0;
}

/* The output maps, in the order they are written. */
enum { MAP_V1, MAP_V2, MAP_V3, MAP_L1, MAP_L2, MAP_L3, MAP_FA, MAP_MD, MAP_MO, MAP_S0,
       MAP_TENSOR, MAP_SSE, NMAPS };
static const char *const map_names[NMAPS] = {"V1", "V2", "V3", "L1", "L2", "L3", "FA",
                                             "MD", "MO", "S0", "tensor", "sse"};
static const int map_volumes[NMAPS] = {3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 1};

static int parse_settings(const dm_args *a, dm_dti_protocol *p, int *weighted)
{
    const char *method = dm_arg(a, dti_opts, "method");
    if (strcmp(method, "wls") && strcmp(method, "ols"))
        return dm_set_error("dti: --method must be wls or ols, not '%s'", method);
    *weighted = !strcmp(method, "wls");
    double min_signal = DM_DTI_MIN_SIGNAL;
    if (dm_arg_double(a, dti_opts, "min-signal", &min_signal) != 0) return -1;
    if (!(min_signal > 0)) return dm_set_error("--min-signal must be positive (the log of it is taken)");
    p->min_signal = min_signal;
    p->weighted = *weighted;
    const char *md = dm_arg(a, dti_opts, "min-diffusivity");
    if (!strcmp(md, "none")) p->min_diffusivity = -INFINITY;
    else if (strcmp(md, "auto") && dm_arg_double(a, dti_opts, "min-diffusivity", &p->min_diffusivity) != 0)
        return dm_set_error("--min-diffusivity: '%s' is not a number, auto or none", md);
    return 0;
}

int dm_cmd_dti(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("dti", dti_opts, argc, argv, &a) != 0) return dm_report_error();
    int rc = 0, weighted = 1, nvol = 0;
    dm_volume data = {0}, mask = {0};
    dm_dti_protocol proto = {0};
    double *bvals = NULL, *bvecs = NULL, *buffers = NULL, *maps[NMAPS] = {0};
    unsigned char *status = NULL;
    const char *data_path = dm_arg(&a, dti_opts, "data"), *out = dm_arg(&a, dti_opts, "out");
    const char *mask_path = dm_arg(&a, dti_opts, "mask");
    const char *prefix = dm_arg(&a, dti_opts, "prefix");
    const char *required[] = {"data", "bvals", "bvecs", "out"};
    long threads = 0;
    for (int i = 0; i < 4 && rc == 0; i++)
        if (!dm_arg(&a, dti_opts, required[i]))
            rc = dm_set_error("dti: --%s is required (see 'dimoc help dti')", required[i]);
    if (rc == 0 && a.npositional)
        rc = dm_set_error("dti: unexpected argument '%s'", a.positional[0]);
    if (rc == 0 && dm_arg_given(&a, dti_opts, "threads"))
        rc = dm_arg_long(&a, dti_opts, "threads", 1, 4096, &threads);
    if (rc != 0) goto done;

    /* Every input is read and checked before anything is written. */
    if ((rc = dm_volume_read(data_path, &data)) != 0) goto done;
    if (data.nt < 7) {
        rc = dm_set_error("%s: %d volume%s; a tensor fit needs a 4D image of at least 7", data_path,
                          data.nt, data.nt == 1 ? "" : "s");
        goto done;
    }
    if ((rc = dm_read_bvals_bvecs(dm_arg(&a, dti_opts, "bvals"), dm_arg(&a, dti_opts, "bvecs"),
                                  data.nt, &bvals, &bvecs, &nvol)) != 0)
        goto done;
    if (mask_path) {
        if ((rc = dm_volume_read(mask_path, &mask)) != 0) goto done;
        if ((rc = dm_volume_check_same_grid(&mask, mask_path, &data, data_path)) != 0) goto done;
    }
    if ((rc = dm_dti_protocol_init(&proto, data.nt, bvals, bvecs)) != 0) {
        rc = dm_set_error("%s: %s", dm_arg(&a, dti_opts, "bvecs"), dm_last_error());
        goto done;
    }
    if ((rc = parse_settings(&a, &proto, &weighted)) != 0) goto done;

    const size_t nvox = DM_NVOX(&data);
    const int M = data.nt, save_tensor = dm_arg_given(&a, dti_opts, "save-tensor"),
              save_sse = dm_arg_given(&a, dti_opts, "sse");
    size_t nmask = 0;
    for (size_t v = 0; v < nvox; v++)
        nmask += !mask.data || (mask.data[v] != 0 && !isnan(mask.data[v]));
    if (nmask == 0) {
        rc = dm_set_error("%s: the mask selects no voxel", mask_path);
        goto done;
    }
    for (int m = 0; m < NMAPS; m++) {
        maps[m] = calloc(nvox * map_volumes[m], sizeof *maps[m]);
        if (!maps[m]) {
            rc = dm_set_error("out of memory for the %s map", map_names[m]);
            goto done;
        }
    }
    status = calloc(nvox, 1);
    if (!status) {
        rc = dm_set_error("out of memory");
        goto done;
    }

    double t0 = omp_get_wtime();
    if (threads > 0) omp_set_num_threads((int)threads);
    /* per thread: the voxel's signal, then the fit's 2 M doubles of work space */
    buffers = malloc((size_t)omp_get_max_threads() * 3 * M * sizeof *buffers);
    if (!buffers) {
        rc = dm_set_error("out of memory");
        goto done;
    }
#pragma omp parallel
    {
        double *signal = buffers + (size_t)omp_get_thread_num() * 3 * M, *work = signal + M;
#pragma omp for schedule(dynamic, 256)
        for (size_t v = 0; v < nvox; v++) {
            if (mask.data && !(mask.data[v] != 0 && !isnan(mask.data[v]))) continue;
            for (int j = 0; j < M; j++) signal[j] = data.data[v + (size_t)j * nvox];
            dm_dti_result r;
            status[v] = (unsigned char)dm_dti_fit_voxel(&proto, signal, work, &r);
            if (status[v] != DM_DTI_FITTED && status[v] != DM_DTI_OLS_ONLY) continue;
            for (int k = 0; k < 3; k++) {
                for (int c = 0; c < 3; c++) maps[MAP_V1 + k][v + c * nvox] = r.vec[k][c];
                maps[MAP_L1 + k][v] = r.lambda[k];
            }
            maps[MAP_FA][v] = r.FA;
            maps[MAP_MD][v] = r.MD;
            maps[MAP_MO][v] = r.MO;
            maps[MAP_S0][v] = r.S0;
            for (int c = 0; c < 6; c++) maps[MAP_TENSOR][v + c * nvox] = r.tensor[c];
            if (save_sse) {
                double sse = 0;
                for (int j = 0; j < M; j++) {
                    double e = signal[j] - dm_dti_predict(&proto, &r, j);
                    sse += e * e;
                }
                maps[MAP_SSE][v] = sse;
            }
        }
    }
    double seconds = omp_get_wtime() - t0;

    if ((rc = dm_mkdir_p(out)) != 0) goto done;
    for (int m = 0; m < NMAPS && rc == 0; m++) {
        if ((m == MAP_TENSOR && !save_tensor) || (m == MAP_SSE && !save_sse)) continue;
        char name[512];
        snprintf(name, sizeof name, "%s%s.nii.gz", prefix ? prefix : "", map_names[m]);
        char *path = dm_path_join(out, name);
        rc = dm_volume_write(path, &data, map_volumes[m], maps[m], DM_OUT_FLOAT32);
        free(path);
    }
    if (rc != 0) goto done;
    size_t count[8] = {0};
    for (size_t v = 0; v < nvox; v++) count[status[v] & 7]++;
    printf("dti: %s fit of %zu voxels in %.2f s: %zu fitted, %zu skipped (NaN/Inf), "
           "%zu skipped (all zero)",
           weighted ? "WLS" : "OLS", nmask, seconds, count[DM_DTI_FITTED] + count[DM_DTI_OLS_ONLY],
           count[DM_DTI_SKIPPED_NONFINITE], count[DM_DTI_SKIPPED_ZERO]);
    if (count[DM_DTI_OLS_ONLY])
        printf(", %zu kept the OLS estimate (singular weights)", count[DM_DTI_OLS_ONLY]);
    printf("; maps in %s\n", out);
done:
    for (int m = 0; m < NMAPS; m++) free(maps[m]);
    free(status);
    free(buffers);
    free(bvals);
    free(bvecs);
    dm_dti_protocol_free(&proto);
    dm_volume_free(&data);
    dm_volume_free(&mask);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
