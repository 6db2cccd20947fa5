/* Per-voxel selection of the lowest of several maps (model selection by BIC or AIC). */
#include "maps/select.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Default name of a map: its folder's last component ("fits/ball_2_sticks/BIC.nii.gz" ->
 * "ball_2_sticks"), else the file name. */
static void default_name(const char *path, char *name, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(name, size, "%s", path);
        return;
    }
    const char *start = slash;
    while (start > path && start[-1] != '/') start--;
    snprintf(name, size, "%.*s", (int)(slash - start), start);
    if (!name[0]) snprintf(name, size, "%s", slash + 1);
}

/* The names given as a comma list, which must name every map. */
static int given_names(const char *list, int n, dm_select_result *r)
{
    char *copy = strdup(list), *save = NULL;
    int k = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save), k++)
        if (k < n) snprintf(r->names[k], sizeof r->names[k], "%s", t);
    free(copy);
    if (k != n) return dm_set_error("--names: %d names for %d maps", k, n);
    return 0;
}

int dm_select_lowest(const dm_select_settings *s, dm_select_result *r)
{
    const int n = s->nmaps;
    memset(r, 0, sizeof *r);
    if (n < 2 || n > DM_SELECT_MAX_MAPS)
        return dm_set_error("select: give 2 to %d maps to compare (got %d)", DM_SELECT_MAX_MAPS, n);
    dm_volume maps[DM_SELECT_MAX_MAPS] = {{0}}, mask = {0};
    double *labels = NULL;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if ((rc = dm_volume_read(s->maps[i], &maps[i])) != 0) goto done;
        if (i > 0 &&
            (rc = dm_volume_check_same_grid(&maps[i], s->maps[i], &maps[0], s->maps[0])) != 0)
            goto done;
        default_name(s->maps[i], r->names[i], sizeof r->names[i]);
    }
    if (s->names && (rc = given_names(s->names, n, r)) != 0) goto done;
    if (s->mask && ((rc = dm_volume_read(s->mask, &mask)) != 0 ||
                    (rc = dm_volume_check_same_grid(&mask, s->mask, &maps[0], s->maps[0])) != 0))
        goto done;

    size_t nvox = DM_NVOX(&maps[0]);
    labels = calloc(nvox ? nvox : 1, sizeof *labels);
    if (!labels) {
        rc = dm_set_error("out of memory");
        goto done;
    }
    for (size_t v = 0; v < nvox; v++) {
        if (mask.data && !(mask.data[v] != 0)) continue;
        int best = -1, usable = 1;
        for (int i = 0; i < n && usable; i++) {
            double x = maps[i].data[v];
            /* without a mask, 0 marks a voxel that was not fitted */
            if (!isfinite(x) || (!mask.data && x == 0))
                usable = 0;
            else if (best < 0 || x < maps[best].data[v])
                best = i;
        }
        if (!usable) continue;
        labels[v] = best + 1;
        r->count[best]++;
        r->total++;
    }
    if (r->total == 0) {
        rc = dm_set_error("select: no voxel where every map has a value");
        goto done;
    }
    /* The map and its provenance beside it go in place together (util/outdir.h). */
    char *tmp[2] = {dm_volume_temp_name(s->out), NULL};
    char *final[2] = {(char *)s->out, dm_provenance_sidecar(s->out)};
    tmp[1] = final[1] ? dm_temp_sibling(final[1]) : NULL;
    if (!tmp[0])
        rc = -1;
    else if (!tmp[1])
        rc = dm_set_error("out of memory");
    else if ((rc = dm_volume_write(tmp[0], &maps[0], 1, labels, DM_OUT_UINT8)) == 0) {
        for (int i = 0; i < n; i++)
            dm_provenance_num(s->prov, DM_PROV_RESULT, r->names[i], (double)r->count[i]);
        dm_provenance_num(s->prov, DM_PROV_RESULT, "voxels_compared", (double)r->total);
        rc = dm_provenance_write(s->prov, tmp[1]);
    }
    if (rc == 0)
        rc = dm_commit_files(tmp, final, 2);
    else
        for (int i = 0; i < 2; i++)
            if (tmp[i]) unlink(tmp[i]);
    for (int i = 0; i < 2; i++) free(tmp[i]);
    free(final[1]);
done:
    for (int i = 0; i < n; i++) dm_volume_free(&maps[i]);
    dm_volume_free(&mask);
    free(labels);
    return rc;
}
