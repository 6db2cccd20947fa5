/* dimoc_track, dimoc_tdi and dimoc_connectome (include/dimoc.h) on arrays against `dimoc track
 * --fod`, `dimoc tdi` and `dimoc connectome` on files: an FOD of circular bundles (lmax 4,
 * written here), tracked by the command and by the API from a float32 copy in C order (x, y,
 * z, coefficient with the coefficient fastest: strides the command's reader never uses) with
 * the seed mask on the FOD's grid (no affine of its own): the same streamlines, point for
 * point, in the same order, and the .tck's counts.  The API's streamlines then give `dimoc
 * tdi`'s map and `dimoc connectome`'s matrices, value for value.  The context's cancel stops a
 * long tracking (DIMOC_E_CANCELLED, no result), both callbacks run on the calling thread, and
 * the next call gives the same streamlines.  Wrong inputs are DIMOC_E_ARGUMENT naming the
 * argument. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_check.h"
#include "check.h"
#include "dimoc.h"
#include "io/space.h"
#include "io/volume.h"
#include "sphere/sh.h"
#include "tractogram/tck.h"
#include "util/error.h"

#define NX 24
#define NY 24
#define NZ 6
#define LMAX 4
#define NC 15
#define VOXEL 2.0


static char *path_of(const char *name)
{
    static char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* The phantom: in the ring 4..10 voxels around the grid's axis, one fibre along the circle
 * (a lobe of MRtrix's basis: c_lm = k_l sqrt(4 pi / (2l + 1)) Y_lm(t)); the seeds the ring's
 * voxels of the middle slices; labels by quadrant (1..4). */
static float fod[NX * NY * NZ * NC]; /* x, y, z, coefficient: the coefficient fastest */
static unsigned char seed[NX * NY * NZ];
static unsigned char labels[NX * NY * NZ];

static int make_phantom(void)
{
    const double pi = 3.14159265358979323846;
    double k[LMAX / 2 + 1], peak = 0;
    for (int l = 0; l <= LMAX; l += 2) {
        k[l / 2] = sqrt((2 * l + 1) / (4 * pi)) * exp(-l * (l + 1) / 18.0);
        peak += k[l / 2] * sqrt((2 * l + 1) / (4 * pi));
    }
    double *image = calloc((size_t)NX * NY * NZ * NC, sizeof *image); /* NIfTI's order */
    double *mask = calloc((size_t)NX * NY * NZ, sizeof *mask);
    if (!image || !mask) return -1;
    const size_t nvox = (size_t)NX * NY * NZ;
    for (int z = 0; z < NZ; z++)
        for (int y = 0; y < NY; y++)
            for (int x = 0; x < NX; x++) {
                size_t v = x + (size_t)NX * (y + (size_t)NY * z);
                double px = x - 11.5, py = y - 11.5, r = sqrt(px * px + py * py);
                labels[v] = (unsigned char)(1 + (x >= NX / 2) + 2 * (y >= NY / 2));
                if (r < 4 || r > 10) continue;
                double t[3] = {-py / r, px / r, 0}, Y[NC];
                dm_sh_basis(LMAX, t, Y);
                for (int l = 0; l <= LMAX; l += 2)
                    for (int m = -l; m <= l; m++) {
                        int j = dm_sh_index(l, m);
                        double c = k[l / 2] / peak * sqrt(4 * pi / (2 * l + 1)) * Y[j];
                        image[v + (size_t)j * nvox] = c;
                        fod[(((size_t)x * NY + y) * NZ + z) * NC + j] = (float)c;
                    }
                if (z == 2 || z == 3) {
                    mask[v] = 1;
                    seed[((size_t)x * NY + y) * NZ + z] = 1;
                }
            }
    double *lab = malloc(nvox * sizeof *lab);
    for (int z = 0; z < NZ; z++)
        for (int y = 0; y < NY; y++)
            for (int x = 0; x < NX; x++)
                lab[x + (size_t)NX * (y + (size_t)NY * z)] =
                    labels[x + (size_t)NX * (y + (size_t)NY * z)];
    int rc = dm_volume_write_new(path_of("fod.nii.gz"), NX, NY, NZ, NC, VOXEL, image);
    if (rc == 0) rc = dm_volume_write_new(path_of("seed.nii.gz"), NX, NY, NZ, 1, VOXEL, mask);
    if (rc == 0) rc = dm_volume_write_new(path_of("parc.nii.gz"), NX, NY, NZ, 1, VOXEL, lab);
    free(image);
    free(mask);
    free(lab);
    return rc;
}

static double affine[16];

static dimoc_track_input inputs(void)
{
    dimoc_track_input in = DIMOC_TRACK_INPUT_INIT;
    in.fod.array = (dimoc_array){fod,
                                 DIMOC_FLOAT32,
                                 4,
                                 {NX, NY, NZ, NC},
                                 {NY * NZ * NC * 4, NZ * NC * 4, NC * 4, 4}};
    in.fod.affine = affine;
    in.seed.array = (dimoc_array){seed, DIMOC_UINT8, 3, {NX, NY, NZ}, {NY * NZ, NZ, 1}};
    return in;
}

/* The result's streamlines against a .tck of the command's ("" when the same). */
static const char *same_tracks(const dimoc_result *res, const char *tck, char *why, size_t size)
{
    why[0] = 0;
    const dimoc_result_array *pa = dimoc_result_get(res, "points");
    const dimoc_result_array *oa = dimoc_result_get(res, "offsets");
    dm_tck t;
    if (!pa || !oa || pa->array.dtype != DIMOC_FLOAT32 || oa->array.dtype != DIMOC_UINT64) {
        snprintf(why, size, "no points and offsets of float32 and uint64");
        return why;
    }
    if (dm_tck_read(path_of(tck), &t) != 0) {
        snprintf(why, size, "%s", dm_last_error());
        return why;
    }
    const float *points = pa->array.data;
    const uint64_t *offsets = oa->array.data;
    size_t count = oa->array.shape[0] - 1;
    if ((long)count != t.count || pa->array.shape[0] != (size_t)t.start[t.count] ||
        pa->array.shape[1] != 3)
        snprintf(why, size, "%zu streamlines of %zu points, the file's %ld of %ld", count,
                 pa->array.shape[0], t.count, t.start[t.count]);
    for (size_t i = 0; i < count && !why[0]; i++)
        if (offsets[i] != (uint64_t)t.start[i])
            snprintf(why, size, "streamline %zu starts at %llu, the file's at %ld", i,
                     (unsigned long long)offsets[i], t.start[i]);
    if (!why[0] && memcmp(points, t.xyz, 3 * sizeof(float) * (size_t)t.start[t.count]) != 0)
        snprintf(why, size, "points differ");
    dm_tck_free(&t);
    return why;
}

static dimoc_streamlines streamlines_of(const dimoc_result *res)
{
    const dimoc_result_array *pa = dimoc_result_get(res, "points");
    const dimoc_result_array *oa = dimoc_result_get(res, "offsets");
    return (dimoc_streamlines){pa->array.data, oa->array.data, oa->array.shape[0] - 1};
}


/* connectome.csv of the command against a matrix of the result, each value as "%.15g". */
static int same_csv(const char *path, const dimoc_result_array *m)
{
    FILE *f = fopen(path_of(path), "r");
    if (!f || !m) return 0;
    const double *v = m->array.data;
    size_t n = m->array.shape[0];
    char want[64], got[64];
    int ok = 1;
    for (size_t i = 0; i < n * n && ok; i++) {
        if (fscanf(f, "%63[^,\n]%*c", want) != 1) ok = 0;
        snprintf(got, sizeof got, "%.15g", v[i]);
        ok = ok && !strcmp(want, got);
    }
    fclose(f);
    return ok;
}

int main(void)
{
    const char *tmp = getenv("TMPROOT") ? getenv("TMPROOT") : "/tmp";
    const char *program = getenv("DIMOC") ? getenv("DIMOC") : "bin/dimoc";
    snprintf(dir, sizeof dir, "%s/api_track", tmp);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    int ok = system(cmd) == 0 && make_phantom() == 0 &&
             run("'%s' track --fod fod.nii.gz --seed seed.nii.gz --out cli --select 200 "
                 "--rseed 7 --threads 2 --device cpu >/dev/null",
                 program) == 0 &&
             run("'%s' tdi cli/tracks.tck --template fod.nii.gz --out tdi.nii.gz --voxel 1.5 "
                 ">/dev/null",
                 program) == 0 &&
             run("'%s' connectome cli/tracks.tck --parc parc.nii.gz --out conn >/dev/null",
                 program) == 0;
    dm_volume head;
    if (ok && dm_volume_read_header(path_of("fod.nii.gz"), &head) == 0) {
        dm_affine a;
        dm_volume_vox2world(&head, &a);
        for (int i = 0; i < 16; i++) affine[i] = a.m[i / 4][i % 4];
        dm_volume_free(&head);
    } else {
        ok = 0;
    }
    check(ok, "api-track-inputs", "the phantom or the commands failed: %s", dm_last_error());
    if (!ok) return 1;

    /* the command's streamlines; the callbacks on this thread */
    dimoc_track_input in = inputs();
    dimoc_track_options opt = DIMOC_TRACK_OPTIONS_INIT;
    opt.select = 200;
    opt.rseed = 7;
    opt.threads = 2;
    opt.device = "cpu";
    seen s = {pthread_self(), 0, 0, 0, -1, ""};
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    ctx.progress = on_progress;
    ctx.cancel = on_cancel;
    ctx.user = &s;
    dimoc_result *res = NULL;
    dimoc_status rc = dimoc_track(&in, &opt, &ctx, &res);
    char why[512];
    check(rc == DIMOC_OK && !same_tracks(res, "cli/tracks.tck", why, sizeof why)[0],
          "api-track-equals-command", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? why : dimoc_last_error()->message);
    if (rc != DIMOC_OK) return 1;
    check(s.progress >= 3 && s.cancels > 0 && !s.off_thread && !strcmp(s.last_stage, "track"),
          "api-track-callbacks-on-calling-thread", "%d progress, %d cancel polls, %d elsewhere, "
          "last %s",
          s.progress, s.cancels, s.off_thread, s.last_stage);
    const char *prov = dimoc_result_provenance(res);
    check(prov && strstr(prov, "\"algorithm\": \"iFOD2\"") && strstr(prov, "\"streamlines\": 200"),
          "api-track-provenance", "%.300s", prov ? prov : "(none)");

    /* the map and the matrices of the streamlines in memory */
    dimoc_tdi_input ti = DIMOC_TDI_INPUT_INIT;
    ti.streamlines = streamlines_of(res);
    ti.step_size = 1; /* half the voxel: the .tck's step_size */
    ti.shape[0] = NX, ti.shape[1] = NY, ti.shape[2] = NZ;
    ti.affine = affine;
    dimoc_tdi_options to = DIMOC_TDI_OPTIONS_INIT;
    to.voxel[0] = to.voxel[1] = to.voxel[2] = 1.5;
    dimoc_result *map = NULL;
    rc = dimoc_tdi(&ti, &to, NULL, &map);
    dm_volume want;
    int same = rc == DIMOC_OK && dm_volume_read(path_of("tdi.nii.gz"), &want) == 0;
    const dimoc_result_array *tdi = same ? dimoc_result_get(map, "tdi") : NULL;
    same = same && tdi && tdi->array.dtype == DIMOC_UINT32 &&
           tdi->array.shape[0] == (size_t)want.nx && tdi->array.shape[1] == (size_t)want.ny &&
           tdi->array.shape[2] == (size_t)want.nz;
    double total = 0;
    for (size_t i = 0; same && i < DM_NVOX(&want); i++) {
        same = ((const uint32_t *)tdi->array.data)[i] == want.data[i];
        total += want.data[i];
    }
    check(same && total > 0, "api-tdi-equals-command", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? "the maps differ" : dimoc_last_error()->message);
    if (rc == DIMOC_OK) dm_volume_free(&want);
    dimoc_result_free(map);
    dimoc_connectome_input ci = DIMOC_CONNECTOME_INPUT_INIT;
    ci.streamlines = streamlines_of(res);
    ci.parcellation.array =
        (dimoc_array){labels, DIMOC_UINT8, 3, {NX, NY, NZ}, {1, NX, (ptrdiff_t)NX * NY}};
    ci.parcellation.affine = affine;
    dimoc_result *conn = NULL;
    rc = dimoc_connectome(&ci, NULL, NULL, &conn);
    check(rc == DIMOC_OK && same_csv("conn/connectome.csv", dimoc_result_get(conn, "connectome")) &&
              same_csv("conn/mean_length.csv", dimoc_result_get(conn, "mean_length")),
          "api-connectome-equals-command", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? "the matrices differ" : dimoc_last_error()->message);
    dimoc_result_free(conn);
    dimoc_result_free(res);

    /* cancelled after a few polls; then the same tracking again */
    dimoc_track_options longer = opt;
    longer.select = 0;
    longer.seeds = 10000000;
    s = (seen){pthread_self(), 0, 0, 0, 3, ""};
    res = NULL;
    rc = dimoc_track(&in, &longer, &ctx, &res);
    check(rc == DIMOC_E_CANCELLED && !res && dimoc_last_error()->code == DIMOC_E_CANCELLED &&
              s.cancels == 4 && !s.off_thread,
          "api-track-cancel", "%s, %d polls: %s", dimoc_status_name(rc), s.cancels,
          dimoc_last_error()->message);
    rc = dimoc_track(&in, &opt, NULL, &res);
    check(rc == DIMOC_OK && !same_tracks(res, "cli/tracks.tck", why, sizeof why)[0],
          "api-track-after-cancel", "%s: %s", dimoc_status_name(rc),
          rc == DIMOC_OK ? why : dimoc_last_error()->message);
    dimoc_result_free(res);

    /* wrong inputs: DIMOC_E_ARGUMENT naming the argument */
    unsigned char small[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    struct {
        const char *label, *word;
        dimoc_track_input in;
        dimoc_track_options opt;
    } bad[7];
    for (int i = 0; i < 7; i++) bad[i].in = inputs(), bad[i].opt = opt;
    bad[0].label = "api-track-refuses-3d-fod", bad[0].word = "fod";
    bad[0].in.fod.array.ndim = 3;
    bad[1].label = "api-track-refuses-no-affine", bad[1].word = "fod";
    bad[1].in.fod.affine = NULL;
    bad[2].label = "api-track-refuses-seed-grid", bad[2].word = "seed";
    bad[2].in.seed.array = (dimoc_array){small, DIMOC_UINT8, 3, {2, 2, 2}, {4, 2, 1}};
    bad[3].label = "api-track-refuses-no-seed", bad[3].word = "seed";
    bad[3].in.seed.array.data = NULL;
    bad[4].label = "api-track-refuses-algorithm", bad[4].word = "algorithm";
    bad[4].opt.algorithm = "fact";
    bad[5].label = "api-track-refuses-step", bad[5].word = "step";
    bad[5].opt.step = INFINITY;
    bad[6].label = "api-track-refuses-angle", bad[6].word = "angle";
    bad[6].opt.angle = 100;
    for (int i = 0; i < 7; i++) {
        res = NULL;
        rc = dimoc_track(&bad[i].in, &bad[i].opt, NULL, &res);
        const char *msg = dimoc_last_error()->message;
        check(rc == DIMOC_E_ARGUMENT && !res && strstr(msg, bad[i].word), bad[i].label, "%s: %s",
              dimoc_status_name(rc), msg);
        dimoc_result_free(res);
    }
    float line[6] = {0, 0, 0, 1, NAN, 0};
    uint64_t offsets[2] = {0, 2}, back[3] = {0, 2, 1};
    ti.streamlines = (dimoc_streamlines){line, offsets, 1};
    rc = dimoc_tdi(&ti, NULL, NULL, &map);
    check(rc == DIMOC_E_ARGUMENT && strstr(dimoc_last_error()->message, "streamlines"),
          "api-tdi-refuses-nan", "%s: %s", dimoc_status_name(rc), dimoc_last_error()->message);
    ti.streamlines = (dimoc_streamlines){line, back, 2};
    rc = dimoc_tdi(&ti, NULL, NULL, &map);
    check(rc == DIMOC_E_ARGUMENT && strstr(dimoc_last_error()->message, "offsets"),
          "api-tdi-refuses-offsets", "%s: %s", dimoc_status_name(rc), dimoc_last_error()->message);
    ci.parcellation.affine = NULL;
    rc = dimoc_connectome(&ci, NULL, NULL, &conn);
    check(rc == DIMOC_E_ARGUMENT && strstr(dimoc_last_error()->message, "parcellation"),
          "api-connectome-refuses-no-affine", "%s: %s", dimoc_status_name(rc),
          dimoc_last_error()->message);
    return failures != 0;
}
