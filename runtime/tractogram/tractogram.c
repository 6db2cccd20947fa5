/* One reader and one writer over the three tractogram formats (.tck, TRX, .trk), by the file's
 * ending; per-streamline values from a file or from the tractogram's own dps. */
#define _GNU_SOURCE
#include "tractogram/tractogram.h"
#include "io/formats.h"
#include "io/space.h"
#include "tractogram/trk.h"
#include "tractogram/trx.h"
#include "util/error.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The format of an existing path: its ending, else its first bytes (a folder: TRX). */
static int format_of(const char *path)
{
    int f = dm_tracts_format_of(path);
    if (f >= 0) return f;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return DM_TRACTS_TRX;
    FILE *fp = fopen(path, "rb");
    char head[16] = {0};
    if (fp) {
        size_t got = fread(head, 1, sizeof head - 1, fp);
        head[got] = 0;
        fclose(fp);
    }
    if (!memcmp(head, "TRACK", 5)) return DM_TRACTS_TRK;
    if (!memcmp(head, "PK", 2)) return DM_TRACTS_TRX;
    return DM_TRACTS_TCK; /* its reader says what is wrong */
}

int dm_tractogram_read(const char *path, dm_tck *t, int threads)
{
    switch (format_of(path)) {
    case DM_TRACTS_TRX: return dm_trx_read(path, t, threads);
    case DM_TRACTS_TRK: return dm_trk_read(path, t, threads);
    default: return dm_tck_read_threads(path, t, threads);
    }
}

void dm_tract_grid_of(const dm_volume *v, dm_tract_grid *g)
{
    dm_affine a;
    dm_volume_vox2world(v, &a);
    g->valid = 1;
    g->dims[0] = v->nx;
    g->dims[1] = v->ny;
    g->dims[2] = v->nz;
    memcpy(g->vox2ras, a.m, sizeof g->vox2ras);
}

struct dm_tractogram_writer {
    int format;
    dm_tck_writer *tck;
    dm_trx_writer *trx;
    dm_trk_writer *trk;
};

dm_tractogram_writer *dm_tractogram_open(const char *path, const char *info,
                                         const dm_tract_grid *grid)
{
    dm_tractogram_writer *w = calloc(1, sizeof *w);
    if (!w) {
        dm_set_error("out of memory");
        return NULL;
    }
    w->format = dm_tracts_format_of(path);
    if (w->format == DM_TRACTS_TRX)
        w->trx = dm_trx_open(path, info, grid);
    else if (w->format == DM_TRACTS_TRK)
        w->trk = dm_trk_open(path, info, grid);
    else
        w->tck = dm_tck_open(path, info);
    if (!w->trx && !w->trk && !w->tck) {
        free(w);
        return NULL;
    }
    return w;
}

int dm_tractogram_set_dps(dm_tractogram_writer *w, const char *name, const float *values,
                          long count)
{
    if (w->trx) return dm_trx_set_dps(w->trx, name, values, count);
    if (w->trk) return dm_trk_set_dps(w->trk, name, values, count);
    return 0;
}

void dm_tractogram_add(dm_tractogram_writer *w, const float *xyz, int n)
{
    if (w->trx)
        dm_trx_add(w->trx, xyz, n);
    else if (w->trk)
        dm_trk_add(w->trk, xyz, n);
    else
        dm_tck_add(w->tck, xyz, n);
}

int dm_tractogram_add_many(dm_tractogram_writer *w, const float *xyz, const size_t *start,
                           const int *npts, long count, int threads)
{
    if (w->trx) return dm_trx_add_many(w->trx, xyz, start, npts, count, threads);
    if (w->trk) return dm_trk_add_many(w->trk, xyz, start, npts, count, threads);
    return dm_tck_add_many(w->tck, xyz, start, npts, count, threads);
}

int dm_tractogram_close(dm_tractogram_writer *w, unsigned long long total_count)
{
    int rc = w->trx   ? dm_trx_close(w->trx, total_count)
             : w->trk ? dm_trk_close(w->trk, total_count)
                      : dm_tck_close(w->tck, total_count);
    free(w);
    return rc;
}

void dm_tractogram_abort(dm_tractogram_writer *w)
{
    if (!w) return;
    if (w->trx) dm_trx_abort(w->trx);
    if (w->trk) dm_trk_abort(w->trk);
    if (w->tck) dm_tck_abort(w->tck);
    free(w);
}

long dm_tractogram_written(const dm_tractogram_writer *w)
{
    return w->trx   ? dm_trx_written(w->trx)
           : w->trk ? dm_trk_written(w->trk)
                    : dm_tck_written(w->tck);
}

char *dm_tractogram_output_name(const char *path)
{
    if (dm_tracts_format_chosen() == DM_TRACTS_TCK) return strdup(path);
    return dm_tracts_output_name(path);
}

/* "dps:NAME"'s values: one column of t's, checked finite (and >= 0 for weights: every use so
 * far, as the files' values are). */
static int dps_values(const char *spec, const dm_tck *t, const char *tck_path, int weights,
                      float **out)
{
    const char *name = spec + 4;
    const dm_tract_values *v = dm_tck_dps(t, name);
    if (!v) {
        if (!t->ndps)
            return dm_set_error("%s: no per-streamline values (dps) to take '%s' from%s", tck_path,
                                spec,
                                dm_tracts_format_of(tck_path) == DM_TRACTS_TCK
                                    ? " (a .tck has none: give a weights file)"
                                    : "");
        size_t len = 0;
        for (int k = 0; k < t->ndps; k++) len += strlen(t->dps[k].name) + 2;
        char *names = calloc(1, len + 1);
        for (int k = 0; names && k < t->ndps; k++)
            strcat(strcat(names, k ? ", " : ""), t->dps[k].name);
        int rc = dm_set_error("%s: no dps named '%s' (it has %s)", tck_path, name,
                              names ? names : "others");
        free(names);
        return rc;
    }
    if (v->ncols != 1)
        return dm_set_error("%s: dps '%s' has %d values per streamline, not one", tck_path, name,
                            v->ncols);
    for (long s = 0; s < t->count; s++) {
        float x = v->values[s];
        if (!isfinite(x))
            return dm_set_error("%s: dps '%s': the value of streamline %ld is not finite", tck_path,
                                name, s + 1);
        if (weights && x < 0)
            return dm_set_error("%s: dps '%s': the weight of streamline %ld is negative (%g; "
                                "weights are >= 0)",
                                tck_path, name, s + 1, (double)x);
    }
    *out = malloc((size_t)(t->count ? t->count : 1) * sizeof **out);
    if (!*out) return dm_set_error("out of memory");
    memcpy(*out, v->values, (size_t)t->count * sizeof **out);
    return 0;
}

int dm_tractogram_weights(const char *spec, const dm_tck *t, const char *tck_path, float **weights)
{
    *weights = NULL;
    if (!strncmp(spec, "dps:", 4)) return dps_values(spec, t, tck_path, 1, weights);
    return dm_tck_weights_read(spec, t->count, tck_path, weights);
}

int dm_tractogram_values(const char *spec, const dm_tck *t, const char *tck_path, float **values,
                         long *n)
{
    *values = NULL;
    *n = 0;
    if (strncmp(spec, "dps:", 4)) return dm_tck_values_read(spec, values, n);
    if (dps_values(spec, t, tck_path, 1, values) != 0) return -1;
    *n = t->count;
    return 0;
}
