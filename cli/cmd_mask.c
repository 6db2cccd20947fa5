/* dimoc mask: a whole-brain mask from the diffusion-weighted image itself, as MRtrix's dwi2mask
 * makes it (runtime/mask/dwi_mask.c). */
#include "args.h"
#include "cli.h"
#include "io/gradients.h"
#include "mask/dwi_mask.h"
#include "util/error.h"

#include <stdio.h>

static const dm_opt mask_opts[] = {
    {"data", "FILE", NULL, "4D diffusion-weighted image with b = 0 and diffusion-weighted volumes"},
    {"bvals", "FILE", NULL, "FSL b-values (s/mm^2), one per volume"},
    {"bvecs", "FILE", NULL, "FSL gradient directions, one per volume"},
    {"grad", "FILE", NULL, DM_GRAD_HELP},
    {"out", "FILE", NULL,
     "the mask, uint8 0/1 on the data's grid; its ending chooses the format (.nii.gz, .nii, "
     ".mif, .mif.gz)"},
    {"clean-scale", "N", "2",
     "the largest scale of the cleaning, which cuts bridges up to 2 N voxels wide between the "
     "mask and its peninsulas (dwi2mask's -clean_scale); 0: no cleaning"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_mask(FILE *out)
{
    dm_args_help(
        out, "dimoc mask --data F [--bvals F --bvecs F | --grad F] --out MASK [options]",
        "A whole-brain mask (brain tissue and CSF) from the DWI itself, as MRtrix 3.0.3's\n"
        "dwi2mask makes it: for each shell, b = 0 included, the mean of the volumes (values\n"
        "of zero or below count as 0) is thresholded at Ridgway's parameter-free optimal\n"
        "threshold (the one that maximises the correlation of the image with its mask); the\n"
        "voxels above any shell's threshold form the mask, which is smoothed by a 3x3x3\n"
        "median, reduced to its largest 6-connected component and has its holes filled.\n"
        "Then peninsulas joined by a narrower bridge (eyes on their optic nerves) are cut off\n"
        "at scales --clean-scale down to 1, the largest component kept, until nothing\n"
        "changes; and voxels whose every volume is zero or not finite are left out.  Shells\n"
        "are grouped as MRtrix groups them (b <= 10 is b = 0; within 80 s/mm^2).",
        mask_opts);
    return 0;
}

int dm_cmd_mask(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("mask", mask_opts, dm_help_mask, argc, argv, &a) != 0)
        return dm_report_error();
    int rc = 0;
    const char *required[] = {"data", "out"};
    long threads = 0, scale = DM_MASK_CLEAN_SCALE;
    for (int i = 0; i < 2 && rc == 0; i++)
        if (!dm_arg(&a, mask_opts, required[i]))
            rc = dm_set_error("mask: --%s is required (see 'dimoc help mask')", required[i]);
    if (rc == 0 && a.npositional)
        rc = dm_set_error("mask: unexpected argument '%s'", a.positional[0]);
    if (rc == 0) rc = dm_arg_long(&a, mask_opts, "clean-scale", 0, 1000000, &scale);
    if (rc == 0 && dm_arg_given(&a, mask_opts, "threads"))
        rc = dm_arg_long(&a, mask_opts, "threads", 1, 4096, &threads);
    dm_dwi_mask_report r;
    const char *out = dm_arg(&a, mask_opts, "out");
    dm_provenance prov;
    dm_provenance_begin(&prov, "mask");
    static const char *const inputs[] = {"data", "bvals", "bvecs", "grad", NULL};
    dm_provenance_args(&prov, &a, mask_opts, inputs);
    if (rc == 0)
        rc = dm_mask_run(dm_arg(&a, mask_opts, "data"), dm_arg(&a, mask_opts, "bvals"),
                         dm_arg(&a, mask_opts, "bvecs"), dm_arg(&a, mask_opts, "grad"), out,
                         (int)scale, (int)threads, &prov, &r);
    dm_provenance_free(&prov);
    if (rc == 0) {
        printf("mask: %zu voxels; thresholds of the shells' mean images:", r.voxels);
        for (int s = 0; s < r.nshell; s++)
            printf("%s b=%g (%d volumes) %g", s ? "," : "", r.shell_b[s], r.shell_count[s],
                   (double)r.threshold[s]);
        printf("%s; written to %s\n", r.cleaned ? "" : "; not cleaned", out);
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
