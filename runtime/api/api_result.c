/* The results of the public API's calls of 1.2 (include/dimoc.h, dimoc_result): named arrays
 * that the result owns, the provenance and the warnings. */
#include "api/api_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct dimoc_result {
    dimoc_result_array **list; /* NULL-terminated; each record and its values malloc'd */
    int n, cap;
    char *provenance;
    dm_api_lines warnings;
};

dimoc_result *dm_api_result_new(void)
{
    dimoc_result *r = calloc(1, sizeof *r);
    if (!r) dm_api_fail(DIMOC_E_MEMORY, "out of memory for the result");
    return r;
}

dm_api_lines *dm_api_result_warnings(dimoc_result *r)
{
    return &r->warnings;
}

void dm_api_result_set_provenance(dimoc_result *r, char *text)
{
    free(r->provenance);
    r->provenance = text;
}

static size_t dtype_size(dimoc_dtype t)
{
    return t == DIMOC_UINT8 ? 1 : t == DIMOC_FLOAT32 || t == DIMOC_UINT32 ? 4 : 8;
}

int dm_api_result_add(dimoc_result *r, const char *name, const char *kind, dimoc_dtype dtype,
                      int ndim, const size_t *shape, int fortran, void *data)
{
    dimoc_result_array *x = calloc(1, sizeof *x);
    char *copy = strdup(name);
    if (r->n + 1 >= r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        dimoc_result_array **more = realloc(r->list, (size_t)cap * sizeof *more);
        if (more) r->list = more, r->cap = cap;
    }
    if (!x || !copy || r->n + 1 >= r->cap) {
        free(x);
        free(copy);
        free(data);
        return dm_api_fail(DIMOC_E_MEMORY, "out of memory for the result's %s", name);
    }
    x->name = copy;
    x->kind = kind;
    x->array.data = data;
    x->array.dtype = dtype;
    x->array.ndim = ndim;
    ptrdiff_t stride = (ptrdiff_t)dtype_size(dtype);
    for (int k = 0; k < ndim; k++) {
        int axis = fortran ? k : ndim - 1 - k; /* the fastest first */
        x->array.shape[axis] = shape[axis];
        x->array.strides[axis] = stride;
        stride *= (ptrdiff_t)shape[axis];
    }
    r->list[r->n++] = x;
    r->list[r->n] = NULL;
    return DIMOC_OK;
}

int dm_api_result_add_map(dimoc_result *r, const char *name, const char *kind, const double *values,
                          const size_t grid[3], size_t volumes, dimoc_dtype dtype)
{
    size_t count = grid[0] * grid[1] * grid[2] * volumes;
    void *data = malloc((count ? count : 1) * dtype_size(dtype));
    if (!data) return dm_api_fail(DIMOC_E_MEMORY, "out of memory for the result's %s", name);
    if (dtype == DIMOC_FLOAT64) {
        memcpy(data, values, count * sizeof *values);
    } else if (dtype == DIMOC_FLOAT32) {
        float *out = data;
        for (size_t i = 0; i < count; i++) out[i] = (float)values[i]; /* as the image writer */
    } else {
        unsigned char *out = data;
        for (size_t i = 0; i < count; i++) {
            double v = values[i];
            out[i] = !(v > 0) ? 0 : v >= 255 ? 255 : (unsigned char)lround(v);
        }
    }
    size_t shape[4] = {grid[0], grid[1], grid[2], volumes};
    return dm_api_result_add(r, name, kind, dtype, volumes > 1 ? 4 : 3, shape, 1, data);
}

dimoc_status dm_api_result_return(dimoc_result *r, dimoc_status rc, dimoc_result **result)
{
    if (rc != DIMOC_OK) {
        dimoc_result_free(r);
        return rc;
    }
    *result = r;
    return DIMOC_OK;
}

int dimoc_result_arrays(const dimoc_result *r, const dimoc_result_array *const **arrays)
{
    if (arrays) *arrays = r ? (const dimoc_result_array *const *)r->list : NULL;
    return r ? r->n : 0;
}

const dimoc_result_array *dimoc_result_get(const dimoc_result *r, const char *name)
{
    for (int i = 0; r && name && i < r->n; i++)
        if (!strcmp(r->list[i]->name, name)) return r->list[i];
    return NULL;
}

const char *dimoc_result_provenance(const dimoc_result *r)
{
    return r ? r->provenance : NULL;
}

int dimoc_result_warnings(const dimoc_result *r, const char *const **lines)
{
    if (lines) *lines = r ? (const char *const *)r->warnings.line : NULL;
    return r ? r->warnings.n : 0;
}

void dimoc_result_free(dimoc_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free((void *)r->list[i]->name);
        free((void *)r->list[i]->array.data);
        free(r->list[i]);
    }
    free(r->list);
    free(r->provenance);
    dm_api_lines_free(&r->warnings);
    free(r);
}
