/* dimoc peaks: the peaks of an FOD image (runtime/csd/peaks_image.c), in MRtrix's sh2peaks
 * layout and as FSL-style dyads. */
#include "args.h"
#include "cli.h"
#include "provenance_args.h"
#include "csd/peaks_image.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>

static const dm_opt peaks_opts[] = {
    {"fod", "FILE", NULL, "the FOD image (the same as the positional FOD)"},
    {"out", "DIR", NULL, "output folder (replaced whole when it holds an earlier run)"},
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
    if (dm_args_parse("peaks", peaks_opts, argc, argv, &a) != 0) return dm_report_error();
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
    if ((rc = dm_fod_image_read(&im, fod, dm_arg(&a, peaks_opts, "mask"))) == 0 &&
        (rc = dm_peaks_find(&im, &s, &maps)) == 0)
        rc = dm_peaks_write(&maps, &im.fod, out, &prov);
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
