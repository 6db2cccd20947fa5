/* The spherical-deconvolution commands over runtime/csd_files/ (the files) and runtime/csd/
 * (the engines):
 *   dimoc response  response functions estimated from the data (MRtrix's dwi2response);
 *   dimoc csd       fibre orientation distributions by constrained spherical deconvolution,
 *                   single-shell or multi-shell multi-tissue (MRtrix's dwi2fod);
 *   dimoc peaks     the peaks of an FOD image (MRtrix's sh2peaks, and FSL-style dyads). */
#include "args.h"
#include "io/formats.h"
#include "io/gradients.h"
#include "cli.h"
#include "csd_files/csd_files.h"
#include "gpu/gpu_device.h"
#include "util/cmdline.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt response_opts[] = {
    {"data", "FILE", NULL, "4D diffusion-weighted image (NIfTI, or MRtrix .mif/.mif.gz)"},
    {"bvals", "FILE", NULL, "FSL b-values (s/mm^2), one per volume"},
    {"bvecs", "FILE", NULL, "FSL gradient directions, one per volume"},
    {"grad", "FILE", NULL, DM_GRAD_HELP},
    {"mask", "FILE", NULL, "3D brain mask on the data's grid (default: every voxel)"},
    {"out", "DIR", NULL, "output folder (replaced whole when it is dimoc's)"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"algorithm", "tournier|dhollander|fa", "tournier",
     "tournier: iterated single-fibre selection (one tissue); dhollander: WM, GM and CSF "
     "(needs b = 0); fa: the most anisotropic voxels"},
    {"lmax", "N", "10", "degree of the WM response (even)"},
    {"device", "cpu|gpu|auto", "auto",
     "where to deconvolve the voxels of the selection's passes (auto: a usable GPU, else the "
     "CPU)"},
    {"gpus", "LIST", "0", "the GPU to use (its ordinal)"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

static const dm_opt csd_opts[] = {
    {"data", "FILE", NULL, "4D diffusion-weighted image (NIfTI, or MRtrix .mif/.mif.gz)"},
    {"bvals", "FILE", NULL, "FSL b-values (s/mm^2), one per volume"},
    {"bvecs", "FILE", NULL, "FSL gradient directions, one per volume"},
    {"grad", "FILE", NULL, DM_GRAD_HELP},
    {"mask", "FILE", NULL, "3D mask on the data's grid: deconvolve where non-zero (default: all)"},
    {"out", "DIR", NULL, "output folder (replaced whole when it is dimoc's)"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"lmax", "N", "8, or the WM response's degree if lower",
     "degree of the WM FOD (even; lmax 8 = 45 coefficients); above the response's degree, its "
     "higher orders are taken as zero (super-resolution, as dwi2fod)"},
    {"directions", "FILE", "MRtrix's electrostatic_repulsion_300, as dwi2fod",
     "the directions the FODs are kept non-negative on: [ azimuth elevation ] pairs in radians, "
     "one a line (dwi2fod's -directions format)"},
    {"response", "WM[,GM[,CSF]]", NULL,
     "response files (MRtrix's format); two files are WM and CSF; default: estimated "
     "(tournier for one shell, dhollander for several) and written beside the FODs"},
    {"msmt", NULL, NULL,
     "multi-tissue even on single-shell data when the responses are estimated (dhollander; "
     "b = 0 and one shell: WM and CSF)"},
    {"normalise", NULL, NULL,
     "intensity normalisation across tissues as MRtrix's mtnormalise -balanced: per-tissue "
     "balance factors and a smooth bias field (cubic in the log domain) so that the tissues' "
     "l = 0 terms sum to 1/sqrt(4 pi) over the mask"},
    {"algorithm", "tournier|dhollander|fa", "by the shells",
     "response estimation when no --response is given"},
    {"device", "cpu|gpu|auto", "auto", "where to deconvolve (auto: a usable GPU, else the CPU)"},
    {"gpus", "LIST", "0", "the GPU to use (its ordinal)"},
    {"precision", "float|double", "double",
     "floating-point precision of single-shell CSD (multi-tissue CSD always solves in double)"},
    {"threads", "N", "all cores", "CPU threads"},
    {"max-iter", "N", "50 (single-shell) or 10 x unknowns", "active-set steps per voxel at most"},
    {"part", "K/N", NULL,
     "deconvolve only the K-th of N shares of the mask's voxels (`dimoc merge` joins them)"},
    DM_QUIET_OPT,
    {NULL, NULL, NULL, NULL},
};

int dm_help_response(FILE *out)
{
    dm_args_help(
        out,
        "dimoc response --data F [--bvals F --bvecs F | --grad F] [--mask F] --out DIR [options]",
        "Estimates response functions as MRtrix's dwi2response does and writes them in\n"
        "its text format (wm_response.txt; with dhollander also gm_response.txt and\n"
        "csf_response.txt: one row per shell of zonal SH coefficients l = 0, 2, ..,\n"
        "b-values in a '# Shells:' comment), the voxels they came from\n"
        "(wm_voxels.nii.gz, ...) and provenance.json.  Single-shell data gives a\n"
        "one-row response of the diffusion-weighted shell, as MRtrix's.",
        response_opts);
    return 0;
}

int dm_help_csd(FILE *out)
{
    dm_args_help(
        out, "dimoc csd --data F [--bvals F --bvecs F | --grad F] [--mask F] --out DIR [options]",
        "Constrained spherical deconvolution: in every voxel the FOD (real SH in MRtrix's\n"
        "basis, order and world frame) whose convolution with the response best fits the\n"
        "signal, kept non-negative on MRtrix's 300 directions (or --directions), with\n"
        "dwi2fod's defaults.  One response of one shell: single-shell super-resolved CSD\n"
        "(Tournier 2007: iterations penalising the negative directions, as MRtrix's csd).\n"
        "Several (WM, GM, CSF; two are WM, CSF): multi-shell multi-tissue CSD (Jeurissen\n"
        "2014: hard constraints, FOD, GM, CSF >= 0, solved exactly by an active-set method,\n"
        "as msmt_csd).  Writes wm_fod.nii.gz (lmax 8: 45 volumes), gm.nii.gz and csf.nii.gz\n"
        "(the l = 0 coefficient, as MRtrix's msmt_csd), the responses used, status.nii.gz\n"
        "(1 solved, 2 iteration limit, 3 degenerate constraints, 4 NaN/Inf signal; 0 outside\n"
        "the mask) and provenance.json with the seconds of each stage.",
        csd_opts);
    return 0;
}

/* The inputs every CSD command needs (the gradient table may be the data's own), and no
 * positional arguments. */
static int check_required(const char *cmd, const dm_args *a, const dm_opt *opts)
{
    static const char *const required[] = {"data", "out"};
    for (int i = 0; i < 2; i++)
        if (!dm_arg(a, opts, required[i]))
            return dm_set_error("%s: --%s is required (see 'dimoc help %s')", cmd, required[i],
                                cmd);
    if (a->npositional)
        return dm_set_error("%s: unexpected argument '%s' (see 'dimoc help %s')", cmd,
                            a->positional[0], cmd);
    return 0;
}

static int parse_lmax(const dm_args *a, const dm_opt *opts, int *lmax)
{
    long v;
    if (dm_arg_long(a, opts, "lmax", 0, 20, &v) != 0) return -1;
    if (v % 2) return dm_set_error("--lmax %ld: the degree must be even", v);
    *lmax = (int)v;
    return 0;
}

/* --algorithm names one of the estimators of csd/response_estimate.h. */
static int check_algorithm(const char *cmd, const char *name)
{
    if (!strcmp(name, "tournier") || !strcmp(name, "dhollander") || !strcmp(name, "fa")) return 0;
    return dm_set_error("%s: --algorithm must be tournier, dhollander or fa, not '%s'", cmd, name);
}

static const char *const inputs[] = {"data", "bvals",    "bvecs",      "grad",
                                     "mask", "response", "directions", NULL};

int dm_cmd_response(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("response", response_opts, dm_help_response, argc, argv, &a) != 0)
        return dm_report_error();
    dm_response_options o = {0};
    long threads = 0;
    int rc = check_required("response", &a, response_opts);
    if (rc == 0) rc = parse_lmax(&a, response_opts, &o.lmax);
    if (rc == 0 && dm_arg_given(&a, response_opts, "threads"))
        rc = dm_arg_long(&a, response_opts, "threads", 1, 4096, &threads);
    o.algorithm = dm_arg(&a, response_opts, "algorithm");
    if (rc == 0) rc = check_algorithm("response", o.algorithm);
    if (rc == 0)
        rc = dm_gpu_resolve_device(dm_arg(&a, response_opts, "device"), "response", &o.use_gpu);
    o.gpus = dm_arg(&a, response_opts, "gpus");
    if (o.algorithm && !strcmp(o.algorithm, "fa")) o.use_gpu = 0; /* it deconvolves nothing */
    if (rc != 0) {
        dm_args_free(&a);
        return dm_report_error();
    }
    o.data = dm_arg(&a, response_opts, "data");
    o.bvals = dm_arg(&a, response_opts, "bvals");
    o.bvecs = dm_arg(&a, response_opts, "bvecs");
    o.grad = dm_arg(&a, response_opts, "grad");
    o.mask = dm_arg(&a, response_opts, "mask");
    o.out = dm_arg(&a, response_opts, "out");
    o.threads = (int)threads;
    char *history = dm_command_line();
    o.history = history;
    dm_provenance prov;
    dm_provenance_begin(&prov, "response");
    dm_provenance_args(&prov, &a, response_opts, inputs);
    rc = dm_response_command(&o, &prov);
    dm_provenance_free(&prov);
    if (rc == 0) printf("response: %s responses in %s\n", o.algorithm, o.out);
    free(history);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

int dm_cmd_csd(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("csd", csd_opts, dm_help_csd, argc, argv, &a) != 0) return dm_report_error();
    dm_arg_quiet(&a, csd_opts);
    dm_csd_options o = {0};
    long threads = 0, max_iter = 0;
    int rc = check_required("csd", &a, csd_opts);
    o.lmax = -1; /* dwi2fod's default: 8, or the WM response's degree if lower */
    if (rc == 0 && dm_arg_given(&a, csd_opts, "lmax")) rc = parse_lmax(&a, csd_opts, &o.lmax);
    if (rc == 0 && dm_arg_given(&a, csd_opts, "threads"))
        rc = dm_arg_long(&a, csd_opts, "threads", 1, 4096, &threads);
    if (rc == 0 && dm_arg_given(&a, csd_opts, "max-iter"))
        rc = dm_arg_long(&a, csd_opts, "max-iter", 1, 100000, &max_iter);
    const char *precision = dm_arg(&a, csd_opts, "precision");
    if (rc == 0 && strcmp(precision, "float") && strcmp(precision, "double"))
        rc = dm_set_error("csd: --precision must be float or double, not '%s'", precision);
    o.algorithm =
        dm_arg_given(&a, csd_opts, "algorithm") ? dm_arg(&a, csd_opts, "algorithm") : NULL;
    if (rc == 0 && o.algorithm) rc = check_algorithm("csd", o.algorithm);
    if (rc == 0 && o.algorithm && dm_arg_given(&a, csd_opts, "response"))
        rc = dm_set_error("csd: --algorithm estimates responses; it cannot go with --response");
    if (rc == 0) rc = dm_part_parse(dm_arg(&a, csd_opts, "part"), &o.part);
    if (rc == 0 && o.part.n > 0 && dm_arg_given(&a, csd_opts, "normalise"))
        rc = dm_set_error("csd: --normalise cannot go with --part: it scales every voxel by a "
                          "field fitted to the whole mask's FODs");
    if (rc == 0) rc = dm_gpu_resolve_device(dm_arg(&a, csd_opts, "device"), "csd", &o.use_gpu);
    if (rc != 0) {
        dm_args_free(&a);
        return dm_report_error();
    }
    o.data = dm_arg(&a, csd_opts, "data");
    o.bvals = dm_arg(&a, csd_opts, "bvals");
    o.bvecs = dm_arg(&a, csd_opts, "bvecs");
    o.grad = dm_arg(&a, csd_opts, "grad");
    o.mask = dm_arg(&a, csd_opts, "mask");
    o.out = dm_arg(&a, csd_opts, "out");
    o.response = dm_arg(&a, csd_opts, "response");
    o.directions =
        dm_arg_given(&a, csd_opts, "directions") ? dm_arg(&a, csd_opts, "directions") : NULL;
    o.msmt = dm_arg_given(&a, csd_opts, "msmt");
    o.normalise = dm_arg_given(&a, csd_opts, "normalise");
    o.gpus = dm_arg(&a, csd_opts, "gpus");
    o.use_double = !strcmp(precision, "double");
    o.threads = (int)threads;
    o.max_iter = (int)max_iter;
    /* The response files' history leaves out --out and --part: a part's files are then the
     * same bytes as a whole run's, wherever each writes. */
    char *args = dm_part_command(), *history = malloc(strlen(args) + 8);
    sprintf(history, "dimoc %s", args);
    free(args);
    o.history = history;
    dm_provenance prov;
    dm_provenance_begin(&prov, "csd");
    dm_provenance_args(&prov, &a, csd_opts, inputs);
    rc = dm_csd_command(&o, &prov);
    dm_provenance_free(&prov);
    if (rc == 0) printf("csd: FODs in %s\n", o.out);
    free(history);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

/* ---- dimoc peaks ---- */

static const dm_opt peaks_opts[] = {
    {"fod", "FILE", NULL, "the FOD image (the same as the positional FOD)"},
    {"out", "DIR", NULL, "output folder (replaced whole when it holds an earlier run)"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"mask", "FILE", NULL,
     "3D mask in the FOD's space: search where non-zero (default: every voxel)"},
    {"num", "N", "3", "peaks kept per voxel, largest first (1 to 16)"},
    {"threshold", "X", "0", "absolute amplitude: peaks below X are dropped (peaks are always > 0)"},
    {"relative", "X", "0.1",
     "peaks below X times the voxel's largest are dropped (0: keep all, as sh2peaks does)"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_peaks(FILE *out)
{
    dm_args_help(
        out, "dimoc peaks FOD.nii.gz --out DIR [--mask F] [--num N] [--threshold X] [--relative X]",
        "Finds the peaks (local maxima) of the FOD of every voxel: an image of real spherical\n"
        "harmonic coefficients in MRtrix's basis and world frame, as many volumes as even\n"
        "degrees up to lmax have coefficients (1, 6, 15, 28, 45 for lmax 8, 66, 91, ...).\n"
        "Each voxel starts from 300 directions, keeps the local maxima and refines them by\n"
        "Newton's method; peaks closer than 1 degree are one.  Writes, as .nii.gz with the\n"
        "FOD's geometry:\n"
        "  peaks        3N volumes as MRtrix's sh2peaks: x, y, z of each peak in world\n"
        "               space, scaled by its amplitude; NaN where there is no peak\n"
        "  dyadsK       peak K (1..N) as a unit vector in FSL's bvecs frame, as bedpostx's\n"
        "               dyads (x flipped for images stored with a positive determinant); 0\n"
        "               where there is none\n"
        "  peak_ampK    its amplitude; 0 where there is none\n"
        "and provenance.json.  The default --relative 0.1 drops the small side lobes that\n"
        "truncating at lmax leaves around every fibre; --relative 0 keeps them.",
        peaks_opts);
    return 0;
}

int dm_cmd_peaks(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("peaks", peaks_opts, dm_help_peaks, argc, argv, &a) != 0)
        return dm_report_error();
    int rc = 0;
    dm_fod_image im = {0};
    dm_peaks_maps maps = {0};
    dm_peaks_settings s = {0};
    const char *out = dm_arg(&a, peaks_opts, "out");
    const char *fod = dm_arg(&a, peaks_opts, "fod");
    long num = 0, threads = 0;

    if (a.npositional > 1)
        rc = dm_set_error("peaks: one FOD only (got '%s' and '%s')", a.positional[0],
                          a.positional[1]);
    else if (a.npositional == 1 && fod)
        rc = dm_set_error("peaks: give the FOD once, as FOD or as --fod, not both");
    else if (a.npositional == 0 && !fod)
        rc =
            dm_set_error("peaks: give the FOD image (FOD.nii.gz or --fod; see 'dimoc help peaks')");
    else if (!out)
        rc = dm_set_error("peaks: --out is required (see 'dimoc help peaks')");
    if (rc != 0) goto done;
    if (!fod) fod = a.positional[0];
    if ((rc = dm_arg_long(&a, peaks_opts, "num", 1, DM_PEAKS_MAX_NUM, &num)) != 0 ||
        (rc = dm_arg_double(&a, peaks_opts, "threshold", &s.threshold)) != 0 ||
        (rc = dm_arg_double(&a, peaks_opts, "relative", &s.relative)) != 0)
        goto done;
    if (dm_arg_given(&a, peaks_opts, "threads") &&
        (rc = dm_arg_long(&a, peaks_opts, "threads", 1, 4096, &threads)) != 0)
        goto done;
    if (!isfinite(s.threshold) || !(s.relative >= 0 && s.relative <= 1)) {
        rc = dm_set_error("peaks: --threshold must be a finite number and --relative between 0 "
                          "and 1 (got %g and %g)",
                          s.threshold, s.relative);
        goto done;
    }
    s.num = (int)num;
    s.threads = (int)threads;

    static const char *const inputs[] = {"fod", "mask", NULL};
    dm_provenance prov;
    dm_provenance_begin(&prov, "peaks");
    dm_provenance_args(&prov, &a, peaks_opts, inputs);
    if ((rc = dm_fod_image_read(&im, fod, dm_arg(&a, peaks_opts, "mask"))) == 0) {
        const dm_image_view fv = dm_view_of_volume(&im.fod, fod);
        const dm_image_view mv = dm_view_of_volume(&im.mask, im.mask_path);
        if ((rc = dm_peaks_find(&fv, &mv, &s, NULL, &maps)) == 0)
            rc = dm_peaks_write(&maps, &im.fod, out, &prov);
    }
    dm_provenance_free(&prov);
    if (rc != 0) goto done;
    printf("peaks: %zu voxels (lmax %d) in %.2f s:", maps.nmask, im.lmax, maps.seconds);
    for (int k = 0; k <= s.num; k++) printf(" %zu with %d,", maps.count[k], k);
    printf(" peaks; maps in %s\n", out);
done:
    dm_peaks_maps_free(&maps);
    dm_fod_image_free(&im);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
