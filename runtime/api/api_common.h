/* Inside the public API (include/dimoc.h): recording a failure for dimoc_last_error().  Only
 * runtime/api includes this. */
#ifndef DIMOC_API_COMMON_H
#define DIMOC_API_COMMON_H

#include "dimoc.h"
#include "io/space.h"
#include "util/error.h"

/* Records a failure without position (message formatted) and returns CODE. */
dimoc_status dm_api_fail(dimoc_status code, const char *fmt, ...) DM_PRINTF(2, 3);
/* Records the runtime's last error (dm_last_error) as a failure of CODE; returns CODE. */
dimoc_status dm_api_fail_runtime(dimoc_status code);
/* Records a whole error record (a file-level failure, a diagnostic); returns its code. */
dimoc_status dm_api_fail_record(const dimoc_error *e);

/* The caller's record over the library's defaults in dst: the fields the caller compiled (the
 * `size` bytes its record begins with).  -1 when that size is not set. */
int dm_api_take_record(void *dst, size_t dst_size, const void *src);
/* Records the runtime's last error as a failure of CODE in the API's words: the command's
 * options ("--dictionary-penalty") by the names of the records' fields (dictionary_penalty). */
dimoc_status dm_api_fail_words(dimoc_status code);

struct dm_array;
/* A caller's array as the runtime's view of it (fit/fit_inputs.h); -1 for a dtype or a number
 * of dimensions it does not take. */
int dm_api_array(const dimoc_array *a, struct dm_array *out);

struct dm_fit_items;
/* Named arrays into items (pointing into the caller's arrays; free only items->item); `what`
 * names the field in messages. */
dimoc_status dm_api_items(const dimoc_named_array *a, int n, const char *what,
                          struct dm_fit_items *items);
/* M b-values (finite, >= 0) and directions (unit length where b > 0; 0 0 0 taken where
 * b <= 50), messages naming bvals and bvecs. */
dimoc_status dm_api_check_table(const double *bvals, const double *bvecs, int M);

/* Lines kept for the caller (the warnings the command would print). */
typedef struct dm_api_lines {
    char **line; /* NULL-terminated once any is kept */
    int n, cap;
} dm_api_lines;
/* A warning sink for dm_warn_capture: user is a dm_api_lines. */
void dm_api_keep_line(void *user, const char *line);
void dm_api_lines_free(dm_api_lines *l);

/* A result of 1.2 being made (api_result.c); NULL with the failure recorded. */
dimoc_result *dm_api_result_new(void);
/* Adds an array of ndim dimensions (x fastest when `fortran`, else row by row), taking `data`
 * (malloc'd; freed on failure).  DIMOC_OK, or DIMOC_E_MEMORY recorded. */
int dm_api_result_add(dimoc_result *r, const char *name, const char *kind, dimoc_dtype dtype,
                      int ndim, const size_t *shape, int fortran, void *data);
/* Adds a map of grid[0] x grid[1] x grid[2] x volumes doubles (x fastest, volume last; 3D when
 * volumes is 1), converted to dtype as the command's image writer converts them. */
int dm_api_result_add_map(dimoc_result *r, const char *name, const char *kind,
                          const double *values, const size_t grid[3], size_t volumes,
                          dimoc_dtype dtype);
/* Where the warnings of the call go (a sink for dm_warn_capture). */
dm_api_lines *dm_api_result_warnings(dimoc_result *r);
/* The result takes text (malloc'd) as its provenance. */
void dm_api_result_set_provenance(dimoc_result *r, char *text);
/* The end of a call: *result = r when rc is DIMOC_OK, else r freed; returns rc. */
dimoc_status dm_api_result_return(dimoc_result *r, dimoc_status rc, dimoc_result **result);

/* A caller's diffusion-weighted input (api_dwi.c) as the engines take it: views of the data
 * and the mask (data NULL: none) on the grid of the affine (the identity without one), and
 * the table in FSL's bvecs frame (b, g malloc'd; `table` names it in messages). */
typedef struct dm_api_dwi {
    dm_image_view data, mask;
    dm_affine v2w;
    double *b, *g;
    const char *table;
} dm_api_dwi;
/* Checks and takes it: DIMOC_OK, or the failure recorded (dm_api_dwi_free in either case). */
dimoc_status dm_api_dwi_take(const dimoc_dwi_input *in, dm_api_dwi *d);
/* The same without a table: the 4D image (named `name` in messages), the mask and the
 * affine (an FOD's for dimoc_peaks). */
dimoc_status dm_api_dwi_view(const dimoc_dwi_input *in, const char *name, dm_api_dwi *d);
void dm_api_dwi_free(dm_api_dwi *d);

struct dm_model_info;
/* The runtime's description of a model (api_model.c), or NULL with the failure recorded as
 * dimoc_model_describe records it (fn names the caller). */
const struct dm_model_info *dm_api_model_info(const dimoc_model *model, const char *fn);

#endif
