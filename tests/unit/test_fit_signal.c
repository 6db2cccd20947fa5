/* A fit's signals gathered ahead of it (fit_inputs.h, fit_plan.c), against the same fit's signals gathered
 * as it is planned: the image and mask are written as files, a fit's problem is planned from
 * them without anything gathered ahead (the reference), then again after
 * dm_fit_signal_ahead; the signals and the statuses the values give must be the same bits.
 * The signals are taken only for exactly the voxels and the image they were gathered from: not
 * for another mask's voxels, not for a copy of the image, not twice. */
#include "fit/fit_inputs.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NX = 13, NY = 11, NZ = 9, NT = 7 };
static char dir[512];

static char *path_in(const char *name)
{
    static char buf[8][600];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* The files: a DWI with an all-zero voxel and one holding a NaN inside the mask, two masks
 * (the second one voxel short of the first), their b-values and directions. */
static int make_files(void)
{
    const size_t nvox = (size_t)NX * NY * NZ;
    double *dwi = malloc(nvox * NT * sizeof *dwi), *mask = malloc(nvox * sizeof *mask);
    srand(11);
    for (size_t i = 0; i < nvox * NT; i++) dwi[i] = 100 + rand() % 9000 / 7.0;
    size_t in = 0, zero = 0, nan_voxel = 0;
    for (size_t v = 0; v < nvox; v++) {
        mask[v] = (rand() % 3 != 0) ? 1 : 0;
        if (mask[v] && ++in == 10) zero = v;
        if (mask[v] && in == 20) nan_voxel = v;
    }
    for (int t = 0; t < NT; t++) dwi[t * nvox + zero] = 0;
    dwi[3 * nvox + nan_voxel] = NAN;
    int rc = dm_volume_write_new(path_in("dwi.nii.gz"), NX, NY, NZ, NT, 2.0, dwi);
    if (rc == 0) rc = dm_volume_write_new(path_in("mask.nii.gz"), NX, NY, NZ, 1, 2.0, mask);
    for (size_t v = nvox; v-- > 0;)
        if (mask[v]) {
            mask[v] = 0; /* the last voxel of the first mask left out */
            break;
        }
    if (rc == 0) rc = dm_volume_write_new(path_in("mask2.nii.gz"), NX, NY, NZ, 1, 2.0, mask);
    FILE *b = fopen(path_in("bvals"), "w"), *g = fopen(path_in("bvecs"), "w");
    for (int t = 0; b && g && t < NT; t++) fprintf(b, "%d ", t == 0 ? 0 : 1000);
    for (int c = 0; b && g && c < 3; c++) {
        for (int t = 0; t < NT; t++) fprintf(g, "%g ", t % 3 == c ? 1.0 : 0.0);
        fprintf(g, "\n");
    }
    if (!b || !g) rc = -1;
    if (b) fclose(b);
    if (g) fclose(g);
    free(dwi), free(mask);
    return rc;
}

static int plan(const char *mask, dm_problem *p)
{
    dm_fit_request r;
    dm_fit_request_defaults(&r);
    r.model = "ball_1_stick";
    r.data = path_in("dwi.nii.gz");
    r.mask = path_in(mask);
    r.bvals = path_in("bvals");
    r.bvecs = path_in("bvecs");
    r.out = path_in("out");
    return dm_problem_load(&r, p);
}

static int same_signals(const dm_problem *a, const dm_problem *b)
{
    return a->nfit == b->nfit && a->M == b->M && a->nvox == b->nvox &&
           !memcmp(a->index, b->index, a->nfit * sizeof *a->index) &&
           !memcmp(a->y, b->y, a->nfit * a->M * sizeof *a->y) &&
           !memcmp(a->status_data, b->status_data, a->nvox);
}

int main(void)
{
    const char *root = getenv("TMPROOT");
    snprintf(dir, sizeof dir, "%s/test_fit_signal.d", root && *root ? root : "/tmp");
    dm_remove_tree(dir);
    if (dm_mkdir_p(dir) != 0 || make_files() != 0) {
        printf("FAIL setup: %s\n", dm_last_error());
        return 1;
    }
    dm_problem ref, ref2;
    if (plan("mask.nii.gz", &ref) != 0 || plan("mask2.nii.gz", &ref2) != 0) {
        printf("FAIL setup: %s\n", dm_last_error());
        return 1;
    }
    size_t skipped = 0;
    for (size_t i = 0; i < ref.nfit; i++)
        skipped += ref.status_data[ref.index[i]] != DM_STATUS_FITTED;
    check(skipped == 2, "reference_skips_the_zero_and_nan_voxels", "%zu skipped", skipped);

    /* Gathered ahead, then the fit's own read takes the image over: the same signals. */
    const char *dwi = path_in("dwi.nii.gz");
    dm_fit_signal_ahead(dwi, path_in("mask.nii.gz"));
    dm_volume_preload_hand_over(dwi);
    dm_volume v;
    int rc = dm_volume_read(dwi, &v);
    dm_array a = dm_array_of_volume(&v);
    dm_problem p;
    memset(&p, 0, sizeof p);
    p.data.nx = NX, p.data.ny = NY, p.data.nz = NZ, p.M = NT, p.nvox = ref.nvox;
    p.nfit = ref.nfit;
    p.index = malloc(ref.nfit * sizeof *p.index);
    memcpy(p.index, ref.index, ref.nfit * sizeof *p.index);
    p.status_data = calloc(ref.nvox, 1);
    int taken = rc == 0 && dm_fit_signal_ahead_take(&a, dwi, &p);
    check(taken, "ahead_taken_for_its_voxels_and_image", "not taken (%s)", dm_last_error());
    check(taken && same_signals(&p, &ref), "ahead_same_bits_as_gathered_in_place",
          "the signals or statuses differ");
    check(!dm_fit_signal_ahead_take(&a, dwi, &p), "ahead_taken_once", "taken a second time");
    free(p.y);
    p.y = NULL;
    dm_volume_free(&v);

    /* A copy of the image (no hand-over) is not the image they were gathered from. */
    dm_fit_signal_ahead(dwi, path_in("mask.nii.gz"));
    rc = dm_volume_read(dwi, &v);
    a = dm_array_of_volume(&v);
    check(rc == 0 && !dm_fit_signal_ahead_take(&a, dwi, &p), "ahead_not_taken_for_a_copy",
          "taken for a copy of the image");
    /* Another mask's voxels: not taken; the fit gathers its own, as without. */
    p.nfit = ref2.nfit;
    check(!dm_fit_signal_ahead_take(&a, dwi, &p), "ahead_not_taken_for_other_voxels",
          "taken for a mask one voxel short");
    dm_volume_free(&v);
    dm_fit_signal_ahead_clear();
    dm_volume_preload_clear();

    /* End to end, as `dimoc bids` does it: the planning of each mask gives the same as the
     * reference, whether or not the voxels gathered ahead were its own. */
    const char *masks[2] = {"mask.nii.gz", "mask2.nii.gz"};
    const dm_problem *refs[2] = {&ref, &ref2};
    for (int k = 0; k < 2; k++) {
        dm_fit_signal_ahead(dwi, path_in("mask.nii.gz"));
        dm_volume_preload_hand_over(dwi);
        dm_problem q;
        rc = plan(masks[k], &q);
        char name[96];
        snprintf(name, sizeof name, "planned_after_ahead_same_bits_%s", masks[k]);
        check(rc == 0 && same_signals(&q, refs[k]), name, "%s",
              rc ? dm_last_error() : "the signals or statuses differ");
        if (rc == 0) dm_problem_free(&q);
        dm_fit_signal_ahead_clear();
        dm_volume_preload_clear();
    }

    /* Files that do not go together: nothing kept, the fit's own read says what is wrong. */
    dm_fit_signal_ahead(path_in("mask.nii.gz"), path_in("mask.nii.gz")); /* a 3D "DWI" */
    dm_volume_preload_hand_over(path_in("mask.nii.gz"));
    rc = dm_volume_read(path_in("mask.nii.gz"), &v);
    a = dm_array_of_volume(&v);
    check(rc == 0 && !dm_fit_signal_ahead_take(&a, path_in("mask.nii.gz"), &p),
          "ahead_nothing_for_a_3d_image", "signals kept for a 3D image");
    dm_volume_free(&v);
    dm_fit_signal_ahead_clear();
    dm_volume_preload_clear();

    free(p.index), free(p.status_data);
    dm_problem_free(&ref);
    dm_problem_free(&ref2);
    dm_remove_tree(dir);
    return failures != 0;
}
