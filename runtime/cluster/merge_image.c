/* `dimoc merge` of NIfTI images: voxels from their owner, or summed (merge_kinds.h). */
#include "cluster/merge_kinds.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/volume.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int read_part_image(const dm_part_manifest *m, const char *name, dm_volume_bytes *b,
                           const dm_volume_bytes *like)
{
    char *path = dm_path_join(m->dir, name);
    int rc = dm_volume_bytes_read(path, b);
    if (rc == 0 && like &&
        (b->header_len != like->header_len || memcmp(b->header, like->header, b->header_len)))
        rc = dm_set_error("%s: its header differs from part 1's: not parts of one run", path);
    if (rc == 0 && m->nvox && b->nvox != m->nvox)
        rc = dm_set_error("%s: %zu voxels, but the part's manifest says %zu", path, b->nvox,
                          m->nvox);
    if (rc != 0 && b->values) dm_volume_bytes_free(b);
    free(path);
    return rc;
}

/* Each voxel from the part that owns it (every volume of a 4D image). */
int dm_merge_voxels(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    dm_volume_bytes base, b;
    if (read_part_image(parts[0], name, &base, NULL) != 0) return -1;
    int rc = 0;
    for (int k = 1; k < n && rc == 0; k++) {
        if ((rc = read_part_image(parts[k], name, &b, &base)) != 0) break;
        size_t bp = (size_t)b.bytes_per, first = parts[k]->voxel_first;
        size_t len = (parts[k]->voxel_end - first) * bp;
        for (size_t t = 0; t < b.nt; t++) {
            size_t at = (t * b.nvox + first) * bp;
            memcpy(base.values + at, b.values + at, len);
        }
        dm_volume_bytes_free(&b);
    }
    if (rc == 0) rc = dm_volume_bytes_write(out, &base);
    dm_volume_bytes_free(&base);
    return rc;
}

static double value_at(const dm_volume_bytes *b, size_t i)
{
    const unsigned char *p = b->values + i * (size_t)b->bytes_per;
    switch (b->datatype) {
    case 2: return *p;                                   /* DT_UINT8 */
    case 4: return *(const int16_t *)(const void *)p;    /* DT_INT16 */
    case 8: return *(const int32_t *)(const void *)p;    /* DT_INT32 */
    case 16: return *(const float *)(const void *)p;     /* DT_FLOAT32 */
    case 64: return *(const double *)(const void *)p;    /* DT_FLOAT64 */
    case 768: return *(const uint32_t *)(const void *)p; /* DT_UINT32 */
    default: return NAN;
    }
}

static void store_at(dm_volume_bytes *b, size_t i, double v)
{
    unsigned char *p = b->values + i * (size_t)b->bytes_per;
    switch (b->datatype) {
    case 2: *p = (unsigned char)lrint(v); break;
    case 4: *(int16_t *)(void *)p = (int16_t)lrint(v); break;
    case 8: *(int32_t *)(void *)p = (int32_t)lrint(v); break;
    case 16: *(float *)(void *)p = (float)v; break;
    case 64: *(double *)(void *)p = v; break;
    case 768: *(uint32_t *)(void *)p = (uint32_t)llrint(v); break;
    }
}

/* Voxel by voxel, the parts' values added in the order of K (in double, stored as the file's
 * type: counts stay exact). */
int dm_merge_sum(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    dm_volume_bytes base, b;
    if (read_part_image(parts[0], name, &base, NULL) != 0) return -1;
    size_t total = base.nvox * base.nt;
    int rc = 0;
    if (base.swapped || isnan(value_at(&base, 0)))
        rc = dm_set_error("%s/%s: summing needs a native-order image of a plain numeric type",
                          parts[0]->dir, name);
    double *sum = rc == 0 ? malloc(total * sizeof *sum) : NULL;
    if (sum) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < total; i++) sum[i] = value_at(&base, i);
    }
    for (int k = 1; k < n && rc == 0; k++) {
        if ((rc = read_part_image(parts[k], name, &b, &base)) != 0) break;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < total; i++) sum[i] += value_at(&b, i);
        dm_volume_bytes_free(&b);
    }
    if (rc == 0) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < total; i++) store_at(&base, i, sum[i]);
    }
    if (rc == 0) rc = dm_volume_bytes_write(out, &base);
    free(sum);
    dm_volume_bytes_free(&base);
    return rc;
}
