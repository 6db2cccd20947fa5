/* dimoc dti: the linear diffusion-tensor fit over an image (runtime/dti/dti_files.c's reader
 * and writer around dti_maps.c's fit), with the maps named as FSL's dtifit names them. */
#include "args.h"
#include "io/formats.h"
#include "io/gradients.h"
#include "cli.h"
#include "dti/dti_maps.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const dm_opt dti_opts[] = {
    {"data", "FILE", NULL, "4D diffusion-weighted image (NIfTI, or MRtrix .mif/.mif.gz)"},
    {"bvals", "FILE", NULL, "FSL b-values (s/mm^2), one per volume"},
    {"bvecs", "FILE", NULL, "FSL gradient directions, one per volume"},
    {"grad", "FILE", NULL, DM_GRAD_HELP},
    {"mask", "FILE", NULL, "3D mask on the data's grid: fit where non-zero (default: every voxel)"},
    {"out", "DIR", NULL, "output folder (created when missing)"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"method", "wls|ols", "wls",
     "wls: OLS, then least squares weighted by the OLS-predicted "
     "signal squared; ols: ordinary least squares of log(S)"},
    {"iter", "N", NULL,
     "MRtrix dwi2tensor's iterated WLS with N reweightings, 0..10, as its -iter N (see above; "
     "dwi2tensor's default is 2)"},
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
    dm_args_help(
        out, "dimoc dti --data F [--bvals F --bvecs F | --grad F] [--mask F] --out DIR [options]",
        "Fits the diffusion tensor log S = log S0 - b g'Dg in every voxel by linear least\n"
        "squares, as FSL's dtifit --wls and DIPY's TensorModel(fit_method='WLS') do, and\n"
        "writes FSL's names: V1 V2 V3 (eigenvectors, 3 volumes each, in the frame of the\n"
        "bvecs), L1 L2 L3 (eigenvalues, descending), FA, MD (mean diffusivity), MO (mode,\n"
        "Ennis & Kindlmann 2006: -1 planar .. +1 linear) and S0, as .nii.gz with the data's\n"
        "geometry.  Diffusivities are in the inverse units of the b-values (mm^2/s for\n"
        "s/mm^2).  Voxels whose signal holds NaN/Inf, or is all zero, are skipped (maps 0).\n"
        "For the non-linear tensor fit use 'dimoc fit dti' (models/dti.model).\n\n"
        "With --iter N the fit is MRtrix dwi2tensor's -iter N: a first fit weighted by the\n"
        "measured signal squared (with --method ols unweighted, as its -ols), then N refits,\n"
        "each weighted by the previous fit's predicted signal squared; signals below 1e-6 x\n"
        "the voxel's largest are raised to it (unless --min-signal is given).  dwi2tensor's\n"
        "default is --iter 2; its tensor is --save-tensor's (in the frame of the bvecs) and its\n"
        "-b0 is S0.  --iter 0 is the first fit alone (OLS with --method ols).  MRtrix 3.0.3 and\n"
        "3.0.4 refit nothing at -iter 1 (the same as -iter 0); --iter 1 reweights once, as\n"
        "MRtrix 3.0.5 and later do.  Without --iter the fit is --method's: wls is OLS, then one\n"
        "refit weighted by its predicted signal squared (dwi2tensor 3.0.5's -ols -iter 1).",
        dti_opts);
    return 0;
}

/* The fit's settings: after the inputs are read, so that a missing file is reported first. */
static int parse_settings(const dm_args *a, dm_dti_settings *s)
{
    const char *method = dm_arg(a, dti_opts, "method");
    if (strcmp(method, "wls") && strcmp(method, "ols"))
        return dm_set_error("dti: --method must be wls or ols, not '%s'", method);
    s->weighted = !strcmp(method, "wls");
    s->iterations = -1;
    long iter = 0;
    if (dm_arg_given(a, dti_opts, "iter")) {
        if (dm_arg_long(a, dti_opts, "iter", 0, 10, &iter) != 0) return -1;
        s->iterations = (int)iter;
        /* dwi2tensor's floor, relative to the voxel, unless --min-signal says otherwise */
        if (!dm_arg_given(a, dti_opts, "min-signal")) s->min_signal_relative = 1e-6;
    }
    s->min_signal = DM_DTI_MIN_SIGNAL;
    if (dm_arg_double(a, dti_opts, "min-signal", &s->min_signal) != 0) return -1;
    if (!(s->min_signal > 0))
        return dm_set_error("--min-signal must be positive (the log of it is taken)");
    const char *md = dm_arg(a, dti_opts, "min-diffusivity");
    s->min_diffusivity = NAN; /* auto */
    if (!strcmp(md, "none"))
        s->min_diffusivity = -INFINITY;
    else if (strcmp(md, "auto") &&
             dm_arg_double(a, dti_opts, "min-diffusivity", &s->min_diffusivity) != 0)
        return dm_set_error("--min-diffusivity: '%s' is not a number, auto or none", md);
    return 0;
}

int dm_cmd_dti(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("dti", dti_opts, dm_help_dti, argc, argv, &a) != 0) return dm_report_error();
    int rc = 0;
    dm_dti_files in = {0};
    dm_dti_maps maps = {0};
    dm_dti_settings settings = {0};
    const char *out = dm_arg(&a, dti_opts, "out");
    const char *required[] = {"data", "out"};
    long threads = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        if (!dm_arg(&a, dti_opts, required[i]))
            rc = dm_set_error("dti: --%s is required (see 'dimoc help dti')", required[i]);
    if (rc == 0 && a.npositional)
        rc = dm_set_error("dti: unexpected argument '%s'", a.positional[0]);
    if (rc == 0 && dm_arg_given(&a, dti_opts, "threads"))
        rc = dm_arg_long(&a, dti_opts, "threads", 1, 4096, &threads);
    if (rc != 0) goto done;
    settings.threads = (int)threads;
    settings.sse = dm_arg_given(&a, dti_opts, "sse");

    static const char *const inputs[] = {"data", "bvals", "bvecs", "grad", "mask", NULL};
    dm_provenance prov;
    dm_provenance_begin(&prov, "dti");
    dm_provenance_args(&prov, &a, dti_opts, inputs);
    if ((rc = dm_dti_files_read(&in, dm_arg(&a, dti_opts, "data"), dm_arg(&a, dti_opts, "bvals"),
                                dm_arg(&a, dti_opts, "bvecs"), dm_arg(&a, dti_opts, "grad"),
                                dm_arg(&a, dti_opts, "mask"))) != 0 ||
        (rc = parse_settings(&a, &settings)) != 0 ||
        (rc = dm_dti_maps_fit(&in.im, &settings, NULL, &maps)) != 0 ||
        (rc = dm_dti_maps_write(&maps, &in.data, out, dm_arg(&a, dti_opts, "prefix"),
                                dm_arg_given(&a, dti_opts, "save-tensor"), settings.sse, &prov)) !=
            0) {
        dm_provenance_free(&prov);
        goto done;
    }
    dm_provenance_free(&prov);
    char fit[64];
    if (settings.iterations >= 0)
        snprintf(fit, sizeof fit, "%s + %d reweighting%s", settings.weighted ? "WLS" : "OLS",
                 settings.iterations, settings.iterations == 1 ? "" : "s");
    else
        snprintf(fit, sizeof fit, "%s", settings.weighted ? "WLS" : "OLS");
    printf("dti: %s fit of %zu voxels in %.2f s: %zu fitted, %zu skipped (NaN/Inf), "
           "%zu skipped (all zero)",
           fit, maps.nmask, maps.seconds, maps.fitted, maps.skipped_nonfinite, maps.skipped_zero);
    if (maps.ols_only)
        printf(", %zu kept %s estimate (singular weights)", maps.ols_only,
               settings.iterations >= 0 ? "an earlier" : "the OLS");
    printf("; maps in %s\n", out);
done:
    dm_dti_maps_free(&maps);
    dm_dti_files_free(&in);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
