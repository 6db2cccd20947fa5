/* The commands' file side of runtime/csd (csd_files.h). */
#include "csd_files/csd_files.h"

#include "csd/dwi.h"
#include "io/space.h"
#include "sphere/sh.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes DIR/NAME as float32 from per-mask-voxel values, made as the file is written: volume c
 * of mask voxel i is vals[i * stride + first + c]; 0 outside the mask. */
static int write_map(const dm_outdir *od, const char *name, const dm_dwi *d, const double *vals,
                     int stride, int nt, int first)
{
    char *path = dm_volume_output_path(od->path, name);
    if (!path) return dm_set_error("out of memory writing %s", name);
    dm_masked_values m = {.nvox = DM_NVOX(&d->data), .vox = d->vox, .n = d->nvox, .vals = vals,
                          .stride = (size_t)stride, .volume_stride = 1, .first = (size_t)first};
    int rc = dm_volume_write_made(path, &d->data, nt, dm_masked_values_get, &m, DM_OUT_FLOAT32, NULL);
    free(path);
    return rc;
}

/* Writes DIR/NAME as uint8 from an image-sized array of bytes. */
static int write_bytes(const dm_outdir *od, const char *name, const dm_dwi *d,
                       const unsigned char *bytes)
{
    size_t nall = DM_NVOX(&d->data);
    double *img = malloc(nall * sizeof *img);
    char *path = dm_volume_output_path(od->path, name);
    int rc = -1;
    if (img && path) {
        for (size_t v = 0; v < nall; v++) img[v] = bytes[v];
        rc = dm_volume_write(path, &d->data, 1, img, DM_OUT_UINT8);
    } else {
        dm_set_error("out of memory writing %s", name);
    }
    free(img);
    free(path);
    return rc;
}

static int write_response(const dm_outdir *od, const char *tissue, const dm_response *r,
                          const char *history)
{
    char name[64];
    snprintf(name, sizeof name, "%s_response.txt", tissue);
    char *path = dm_path_join(od->path, name);
    int rc = path ? dm_response_write(path, r, history) : dm_set_error("out of memory");
    free(path);
    return rc;
}

/* Splits "a,b,c" into at most max paths (pointers into a copy kept in *buf). */
static int split_paths(const char *list, char **buf, const char **path, int max)
{
    *buf = strdup(list);
    if (!*buf) return dm_set_error("out of memory");
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(*buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == max) return dm_set_error("--response: more than %d files (WM, GM, CSF)", max);
        path[n++] = tok;
    }
    if (n == 0) return dm_set_error("--response: no file named");
    return n;
}

int dm_csd_command(const dm_csd_options *o, dm_provenance *prov)
{
    int rc = -1, nresp = 0;
    double t0 = dm_now_seconds();
    dm_dwi d = {0};
    dm_csd_dirs dirs = {0};
    dm_response resp[DM_CSD_MAX_TISSUES];
    const char *rpath[DM_CSD_MAX_TISSUES] = {0};
    char *rbuf = NULL;
    dm_outdir od = {0};
    dm_csd_gpu_warm warm = {0};
    dm_csd_result res = {0};

    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    if (o->use_gpu) dm_csd_gpu_warm_start(&warm, o->gpus); /* CUDA starts while we read */
    if (o->response) {
        nresp = split_paths(o->response, &rbuf, rpath, DM_CSD_MAX_TISSUES);
        if (nresp < 0) goto done;
        for (int t = 0; t < nresp; t++)
            if (dm_response_read(rpath[t], &resp[t]) != 0) goto done;
    }
    if (dm_csd_dirs_read(o->directions, &dirs) != 0) goto done;
    if (dm_dwi_read_grad(&d, o->data, o->bvals, o->bvecs, o->grad, o->mask) != 0) goto done;
    if (dm_csd_run(o, &d, nresp, resp, rpath, &dirs, &warm, dm_now_seconds() - t0, NULL, prov,
                   &res) != 0)
        goto done;

    t0 = dm_now_seconds();
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    for (int t = 0; t < res.ntissue; t++) {
        char name[64], voxels[64];
        snprintf(name, sizeof name, "%s.nii.gz", t == 0 ? "wm_fod" : res.tissue[t]);
        snprintf(voxels, sizeof voxels, "%s_voxels.nii.gz", res.tissue[t]);
        if (write_map(&od, name, &d, res.X, res.plan.n, dm_sh_ncoef(res.plan.tissue_lmax[t]),
                      res.plan.tissue_off[t]) != 0 ||
            write_response(&od, res.tissue[t], &res.resp[t], o->history) != 0 ||
            (res.voxels[t] && write_bytes(&od, voxels, &d, res.voxels[t]) != 0))
            goto done;
    }
    {
        unsigned char *img = calloc(DM_NVOX(&d.data), 1);
        if (!img) {
            dm_set_error("out of memory");
            goto done;
        }
        for (size_t i = 0; i < d.nvox; i++) img[d.vox[i]] = res.status[i];
        int bad = write_bytes(&od, "status.nii.gz", &d, img) != 0;
        free(img);
        if (bad) goto done;
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write", dm_now_seconds() - t0);
    {
        char *path = dm_path_join(od.path, "provenance.json");
        int bad = !path || dm_provenance_write(prov, path) != 0;
        free(path);
        if (bad) goto done;
    }
    if (o->part.n > 0) {
        /* the responses and the voxels they came from are the whole mask's, in every part */
        static const dm_part_rule rules[] = {{"*_voxels.nii.gz", DM_MERGE_SAME},
                                             {"*_response.txt", DM_MERGE_SAME},
                                             {"*.nii.gz", DM_MERGE_VOXELS}};
        char *command = dm_part_command();
        dm_part_info info = {.command = command,
                             .voxel_first = res.own_first,
                             .voxel_end = res.own_end,
                             .nvox = DM_NVOX(&d.data)};
        int bad = dm_part_write(od.path, &o->part, &info, rules, 3) != 0;
        free(command);
        if (bad) goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    char note[256];
    if (dm_csd_unsolved_note(&res, d.nvox, note, sizeof note)) fprintf(stderr, "csd: %s\n", note);
    rc = 0;
done:
    if (rc != 0) dm_outdir_abort(&od);
    if (o->use_gpu) dm_csd_gpu_warm_end(&warm);
    free(rbuf);
    dm_csd_result_free(&res);
    dm_csd_dirs_free(&dirs);
    dm_dwi_free(&d);
    return rc;
}

int dm_response_command(const dm_response_options *o, dm_provenance *prov)
{
    int rc = -1;
    dm_dwi d = {0};
    dm_response_set est = {0};
    dm_outdir od = {0};
    dm_csd_gpu_warm warm = {0};
    dm_csd_gpu_solver g = {.warm = &warm};
    const dm_csd_solver solver = dm_csd_gpu_solver_of(&g);
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    if (o->use_gpu) dm_csd_gpu_warm_start(&warm, o->gpus); /* CUDA starts while we read */
    if (dm_dwi_read_grad(&d, o->data, o->bvals, o->bvecs, o->grad, o->mask) != 0) goto done;
    double t0 = dm_now_seconds();
    if (dm_response_estimate(&d, o->algorithm, o->lmax, o->threads, o->use_gpu ? &solver : NULL,
                             &est) != 0)
        goto done;
    double secs = dm_now_seconds() - t0;
    if (o->use_gpu) {
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response_gpu", g.times.solve);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response_gpu_setup",
                          g.times.compile + g.times.upload + g.times.download);
    }
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    for (int t = 0; t < est.ntissue; t++) {
        if (write_response(&od, dm_tissue_names[t], &est.r[t], o->history) != 0) goto done;
        char name[64];
        snprintf(name, sizeof name, "%s_voxels.nii.gz", dm_tissue_names[t]);
        if (write_bytes(&od, name, &d, est.voxels[t]) != 0) goto done;
    }
    dm_response_provenance(prov, &est, secs);
    {
        char *path = dm_path_join(od.path, "provenance.json");
        int bad = !path || dm_provenance_write(prov, path) != 0;
        free(path);
        if (bad) goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    rc = 0;
done:
    if (rc != 0) dm_outdir_abort(&od);
    if (o->use_gpu) dm_csd_gpu_warm_end(&warm);
    dm_response_set_free(&est);
    dm_dwi_free(&d);
    return rc;
}

/* ---- dimoc peaks ---- */

int dm_fod_image_read(dm_fod_image *im, const char *fod, const char *mask)
{
    memset(im, 0, sizeof *im);
    im->fod_path = fod;
    im->mask_path = mask;
    if (dm_volume_read(fod, &im->fod) != 0) return -1;
    im->lmax = dm_sh_lmax_for(im->fod.nt); /* (the search checks the count of coefficients) */
    if (mask && dm_volume_read(mask, &im->mask) != 0) return -1;
    if (mask && im->mask.nt > 1)
        return dm_set_error("%s: a 4D image (%dx%dx%dx%d); a mask is 3D", mask, im->mask.nx,
                            im->mask.ny, im->mask.nz, im->mask.nt);
    if (mask && dm_volume_check_same_space(&im->mask, mask, &im->fod, fod) != 0) return -1;
    return 0;
}

void dm_fod_image_free(dm_fod_image *im)
{
    dm_volume_free(&im->fod);
    dm_volume_free(&im->mask);
    memset(im, 0, sizeof *im);
}

/* Writes DIR/name from nt volumes of data. */
static int write_volume(const char *dir, const char *name, const dm_volume *like, int nt,
                        const double *data)
{
    char *path = dm_volume_output_path(dir, name);
    int rc = path ? dm_volume_write(path, like, nt, data, DM_OUT_FLOAT32)
                  : dm_set_error("out of memory");
    free(path);
    return rc;
}

int dm_peaks_write(const dm_peaks_maps *m, const dm_volume *like, const char *dir,
                   dm_provenance *prov)
{
    const size_t nvox = m->nvox;
    const int num = m->num;
    double *buf = malloc(nvox * 3 * num * sizeof *buf);
    if (!buf) return dm_set_error("out of memory for the peak maps");
    dm_outdir od;
    if (dm_outdir_begin(&od, dir, DM_OUTDIR_REPLACE) != 0) {
        free(buf);
        return -1;
    }
    dm_peaks_scaled(m, buf);
    int rc = write_volume(od.path, "peaks.nii.gz", like, 3 * num, buf);
    double R[3][3];
    dm_volume_bvec_rotation(like, R);
    for (int k = 0; k < num && rc == 0; k++) {
        dm_peaks_dyads(m, R, k, buf);
        char name[64];
        snprintf(name, sizeof name, "dyads%d.nii.gz", k + 1);
        rc = write_volume(od.path, name, like, 3, buf);
        snprintf(name, sizeof name, "peak_amp%d.nii.gz", k + 1);
        if (rc == 0) rc = write_volume(od.path, name, like, 1, m->amps + (size_t)k * nvox);
    }
    free(buf);
    if (rc == 0) {
        dm_peaks_provenance(prov, m);
        char *path = dm_path_join(od.path, "provenance.json");
        rc = path ? dm_provenance_write(prov, path) : dm_set_error("out of memory");
        free(path);
    }
    if (rc == 0) return dm_outdir_commit(&od);
    dm_outdir_abort(&od);
    return -1;
}
