/* Planning a fit, the builder's half (fit_inputs.h): the inputs as arrays (from the reader,
 * fit_read.c, or the C API's caller) checked and gathered into a problem (the measurement rows,
 * the voxels to fit and their signal, the per-voxel inputs), then each stage's starts and
 * settings. */
#include "util/error.h"
#include "fit/fit_inputs.h"
#include "fit/fit_starts.h"
#include "io/bigalloc.h"
#include "io/volume.h"
#include "io/textio.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

dm_array dm_array_of_volume(const dm_volume *v)
{
    dm_array a = {v->data, DM_ARRAY_F64, v->nt > 1 ? 4 : 3, {0}, {0}};
    size_t n[4] = {(size_t)v->nx, (size_t)v->ny, (size_t)v->nz, (size_t)v->nt};
    ptrdiff_t s = sizeof(double);
    for (int k = 0; k < 4; k++) {
        a.shape[k] = n[k];
        a.stride[k] = s;
        s *= (ptrdiff_t)n[k];
    }
    return a;
}

double dm_array_at(const dm_array *a, ptrdiff_t offset)
{
    const char *p = (const char *)a->data + offset;
    switch (a->type) {
    case DM_ARRAY_F32: return *(const float *)p;
    case DM_ARRAY_U8: return *(const unsigned char *)p;
    default: return *(const double *)p;
    }
}

int dm_fit_for_each_item(const char *spec, const char *what, dm_fit_item_fn fn, void *ctx)
{
    if (!spec || !*spec) return 0;
    char *s = strdup(spec);
    char name[256] = "", values[8192] = "";
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, ",;", &save); tok && rc == 0; tok = strtok_r(NULL, ",;", &save)) {
        char *eq = strchr(tok, '=');
        if (eq) {
            if (name[0]) rc = fn(ctx, name, values);
            *eq = 0;
            snprintf(name, sizeof name, "%s", tok);
            snprintf(values, sizeof values, "%s", eq + 1);
        } else if (name[0]) {
            size_t n = strlen(values);
            snprintf(values + n, sizeof values - n, ",%s", tok);
        } else {
            rc = dm_set_error("%s: '%s' is not of the form NAME=VALUE", what, tok);
        }
    }
    if (rc == 0 && name[0]) rc = fn(ctx, name, values);
    free(s);
    return rc;
}

/* A protocol without diffusion weighting: every b-value 0, or every direction of a b>0
 * volume 0 0 0.  Either leaves nothing to fit; both are errors (docs/fitting.md), as is a
 * direction 0 0 0 at b > 10 for a model that reads the directions. */
static int check_weighting(const char *bvals, const char *bvecs, const double *b, const double *g,
                           int nvol, int reads_b, int reads_g)
{
    int weighted = 0, directed = 0;
    for (int j = 0; j < nvol; j++) {
        if (b[j] <= 0) continue;
        weighted++;
        if (g[3 * j] != 0 || g[3 * j + 1] != 0 || g[3 * j + 2] != 0) directed++;
    }
    if (reads_b && !weighted)
        return dm_set_error("%s: every b-value is 0 (%d volume%s): no diffusion weighting to fit",
                            bvals, nvol, nvol == 1 ? "" : "s");
    if (reads_g && weighted && !directed)
        return dm_set_error("%s: every direction is 0 0 0 (%d volume%s with b > 0): no gradient "
                            "direction to fit",
                            bvecs, weighted, weighted == 1 ? "" : "s");
    /* some 0 0 0 at b > 10: a model of directions would fit them as a b = 0 measurement */
    return reads_g ? dm_check_directed(bvecs, nvol, b, g) : 0;
}

int dm_fit_parse_methods(const char *s, int *methods)
{
    *methods = 0;
    char *copy = strdup(s), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "grid"))
            *methods |= DM_METHOD_GRID;
        else if (!strcmp(t, "lm"))
            *methods |= DM_METHOD_LM;
        else if (!strcmp(t, "mcmc"))
            *methods |= DM_METHOD_MCMC;
        else if (!strcmp(t, "dictionary"))
            *methods |= DM_METHOD_DICT;
        else
            rc = dm_set_error("--method: unknown method '%s' (grid, dictionary, lm, mcmc)", t);
    }
    free(copy);
    if (rc == 0 && !*methods) rc = dm_set_error("--method: no method given");
    if (rc == 0 && (*methods & DM_METHOD_DICT) && (*methods & DM_METHOD_GRID))
        rc = dm_set_error("--method: dictionary and grid both search the grid; give one of them");
    return rc;
}

/* --grid NAME=v1,v2,..|lo:step:hi */
struct grid_ctx {
    dm_problem *p;
    int cap;
};
static int add_grid(void *ctx, const char *name, const char *values)
{
    struct grid_ctx *g = ctx;
    dm_problem *p = g->p;
    int k = dm_model_param_index(&p->mi, name);
    if (k < 0) return dm_set_error("--grid: model '%s' has no parameter '%s'", p->mi.name, name);
    p->cfg.grid_offset[k] = p->ngrid_values;
    double lo, step, hi;
    char tail;
    int n = 0;
    if (sscanf(values, "%lf:%lf:%lf%c", &lo, &step, &hi, &tail) == 3) {
        if (!(step > 0) || hi < lo)
            return dm_set_error("--grid %s: '%s' needs step > 0 and lo <= hi", name, values);
        long count = (long)floor((hi - lo) / step + 1e-9) + 1;
        if (count > 100000) return dm_set_error("--grid %s: too many values (%ld)", name, count);
        for (long i = 0; i < count; i++) {
            if (p->ngrid_values >= g->cap) {
                g->cap = g->cap * 2 + 64;
                p->grid_values = realloc(p->grid_values, g->cap * sizeof(double));
            }
            p->grid_values[p->ngrid_values++] = lo + i * step;
            n++;
        }
    } else {
        char *copy = strdup(values), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *end;
            double v = strtod(t, &end);
            if (*end || end == t) {
                free(copy);
                return dm_set_error("--grid %s: '%s' is not a number", name, t);
            }
            if (p->ngrid_values >= g->cap) {
                g->cap = g->cap * 2 + 64;
                p->grid_values = realloc(p->grid_values, g->cap * sizeof(double));
            }
            p->grid_values[p->ngrid_values++] = v;
            n++;
        }
        free(copy);
    }
    if (n == 0) return dm_set_error("--grid %s: no values", name);
    p->cfg.grid_count[k] = n;
    return 0;
}

struct fixed_ctx {
    dm_problem *p;
};
static int set_fixed(dm_problem *p, const char *list)
{
    if (!list) return 0;
    char *copy = strdup(list), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        int k = dm_model_param_index(&p->mi, t);
        if (k < 0)
            rc = dm_set_error("--fixed: model '%s' has no parameter '%s'", p->mi.name, t);
        else
            p->cfg.fixed_mask |= 1u << k;
    }
    free(copy);
    return rc;
}

/* --samples-of: the parameters whose samples are written (every one when list is NULL). */
static int set_samples_of(dm_problem *p, const char *list)
{
    p->samples_mask = list ? 0 : ~0ull;
    if (!list) return 0;
    char *copy = strdup(list), *save = NULL;
    int rc = copy ? 0 : dm_set_error("--samples-of: out of memory");
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && rc == 0;
         t = strtok_r(NULL, ",", &save)) {
        int k = dm_model_param_index(&p->mi, t);
        if (k < 0)
            rc = dm_set_error("--samples-of: model '%s' has no parameter '%s'", p->mi.name, t);
        else
            p->samples_mask |= 1ull << k;
    }
    free(copy);
    return rc;
}

/* The b-value scale, from the range and the signal decay.  dimoc's models take b in s/mm^2
 * (diffusivities in mm^2/s, about 3e-3 at most): b-values below 10 are ms/um^2 (1 = 1000
 * s/mm^2) when the signal falls like it does at b = 1000, an error; with little decay they may
 * be meant (a model in other units), a warning.  b-values above 1e6 are s/m^2, an error.  No
 * b=0 volume (b <= 50) is a warning: S0 is only extrapolated. */
static int check_b_scale(const dm_problem *p, const char *bvals)
{
    double bmax = 0, bmin = INFINITY;
    for (int j = 0; j < p->M; j++) {
        bmax = fmax(bmax, p->bvals[j]);
        bmin = fmin(bmin, p->bvals[j]);
    }
    if (bmax > 1e6)
        return dm_set_error("%s: b-values up to %g look like s/m^2; dimoc expects s/mm^2 (b=1000 "
                            "s/mm^2 is 1e9 s/m^2): divide them by 1e6",
                            bvals, bmax);
    if (bmax > 0 && bmax < 10) {
        /* Mean signal of the b~0 volumes and of the top shell over the voxels to fit. */
        double s0 = 0, sw = 0, bw = 0;
        long n0 = 0, nw = 0;
        for (size_t i = 0; i < p->nfit; i++) {
            if (p->status[p->index[i]] != DM_STATUS_FITTED) continue;
            for (int j = 0; j < p->M; j++) {
                double y = p->y[i * p->M + j], bj = p->bvals[j];
                if (bj <= 0.05 * bmax)
                    s0 += y, n0++;
                else if (bj >= 0.5 * bmax)
                    sw += y, bw += bj, nw++;
            }
        }
        double ratio = n0 && nw && s0 > 0 ? (sw / nw) / (s0 / n0) : NAN;
        double decay = ratio > 0 ? -log(ratio) / (bw / nw) : NAN;
        if (!(decay <= 0.05)) /* also when it cannot be measured */
            return isnan(ratio) ? dm_set_error("%s: b-values up to %g look like ms/um^2; dimoc "
                                               "expects s/mm^2 (multiply them by 1000)",
                                               bvals, bmax)
                                : dm_set_error("%s: b-values up to %g, yet the signal decays as at "
                                               "b=1000 s/mm^2: these are ms/um^2; dimoc expects "
                                               "s/mm^2 (multiply them by 1000)",
                                               bvals, bmax);
        dm_warn("%s: b-values up to %g only, with little signal decay: dimoc expects s/mm^2; if "
                "they are ms/um^2, multiply them by 1000",
                bvals, bmax);
    }
    if (bmin > 50)
        dm_warn("%s: no b=0 volume (the smallest b-value is %g): S0 is only extrapolated", bvals,
                bmin);
    return 0;
}

/* The item named `name`, or NULL. */
static const dm_fit_item *find_item(const dm_fit_items *it, const char *name)
{
    for (int i = 0; i < it->n; i++)
        if (!strcmp(it->item[i].name, name)) return &it->item[i];
    return NULL;
}

/* A measure's rows from `x`: M values (width 1) or M x width. */
static int measure_rows(const dm_model_info *mi, const dm_measure_info *m, const dm_fit_item *x,
                        const char *option, int M, double *meas)
{
    const dm_array *a = &x->map;
    int ok = a->data && a->shape[0] == (size_t)M &&
             ((a->ndim == 1 && m->width == 1) || (a->ndim == 2 && a->shape[1] == (size_t)m->width));
    if (!ok)
        return dm_set_error("%s %s: model '%s' needs %d value%s per volume for %d volumes", option,
                            x->name, mi->name, m->width, m->width == 1 ? "" : "s", M);
    for (int j = 0; j < M; j++)
        for (int c = 0; c < m->width; c++) {
            double v = dm_array_at(a, j * a->stride[0] + (a->ndim == 2 ? c * a->stride[1] : 0));
            if (!isfinite(v))
                return dm_set_error("%s %s: value %d is not a finite number", option, x->name,
                                    j + 1);
            meas[(size_t)j * mi->measure_width + m->column + c] = v;
        }
    return 0;
}

int dm_fit_measurements(const dm_model_info *mi, const dm_fit_inputs *in, int M, double **meas_out,
                        double **bvals_out)
{
    const int W = mi->measure_width;
    const char *option = in->measure_option ? in->measure_option : "measure";
    *meas_out = NULL;
    if (bvals_out) *bvals_out = NULL;
    int reads_b = 0, reads_g = 0;
    for (int i = 0; i < mi->nmeasures; i++) {
        reads_b |= mi->measures[i].source == DM_SRC_BVALS;
        reads_g |= mi->measures[i].source == DM_SRC_BVECS;
    }
    for (int i = 0; i < in->measures.n; i++) {
        int k = 0;
        while (k < mi->nmeasures && strcmp(mi->measures[k].name, in->measures.item[i].name)) k++;
        if (k == mi->nmeasures || mi->measures[k].source == DM_SRC_BVALS ||
            mi->measures[k].source == DM_SRC_BVECS)
            return dm_set_error("%s: model '%s' has no per-measurement input '%s' read from a file "
                                "or a scheme column",
                                option, mi->name, in->measures.item[i].name);
    }
    if ((reads_b || reads_g) && (!in->b || !in->g))
        return dm_set_error("model '%s' reads b-values and gradient directions: give %s and %s",
                            mi->name, in->b_name ? in->b_name : "bvals",
                            in->g_name ? in->g_name : "bvecs");
    const char *bname = in->b_name ? in->b_name : "bvals";
    const char *gname = in->g_name ? in->g_name : "bvecs";
    for (int j = 0; (reads_b || reads_g) && j < M; j++) {
        if (!isfinite(in->b[j]) || in->b[j] < 0)
            return dm_set_error("%s: b-value %d (%g) is not a finite number >= 0", bname, j + 1,
                                in->b[j]);
        for (int c = 0; c < 3; c++)
            if (!isfinite(in->g[3 * j + c]))
                return dm_set_error("%s: direction %d is not finite", gname, j + 1);
    }
    if ((reads_b || reads_g) &&
        check_weighting(bname, gname, in->b, in->g, M, reads_b, reads_g) != 0)
        return -1;
    double *meas = calloc((size_t)M * (W ? W : 1), sizeof *meas);
    if (!meas) return dm_set_error("out of memory for %d measurements", M);
    for (int i = 0; i < mi->nmeasures; i++) {
        const dm_measure_info *x = &mi->measures[i];
        if (x->source == DM_SRC_BVALS || x->source == DM_SRC_BVECS) {
            int from_vecs = x->source == DM_SRC_BVECS;
            int w = from_vecs ? 3 : 1;
            if (x->width != w) {
                free(meas);
                return dm_set_error("model '%s': measure '%s' has width %d but %s give %d",
                                    mi->name, x->name, x->width, from_vecs ? "bvecs" : "bvals", w);
            }
            for (int j = 0; j < M; j++)
                for (int c = 0; c < w; c++)
                    meas[(size_t)j * W + x->column + c] = from_vecs ? in->g[3 * j + c] : in->b[j];
            continue;
        }
        const dm_fit_item *it = find_item(&in->measures, x->name);
        int rc = it ? measure_rows(mi, x, it, option, M, meas)
                    : dm_set_error("model '%s' needs per-measurement input '%s': give %s %s",
                                   mi->name, x->name, option, x->name);
        if (rc != 0) {
            free(meas);
            return -1;
        }
    }
    if (bvals_out && (reads_b || reads_g)) {
        if (!(*bvals_out = malloc((size_t)M * sizeof **bvals_out))) {
            free(meas);
            return dm_set_error("out of memory for %d measurements", M);
        }
        memcpy(*bvals_out, in->b, (size_t)M * sizeof **bvals_out);
    }
    *meas_out = meas;
    return 0;
}

/* The byte offset of voxel v (a linear index of the grid, x fastest) in a, past its spatial
 * axes. */
static ptrdiff_t grid_offset(int nx, int ny, const dm_array *a, size_t v)
{
    const size_t sx = (size_t)nx, sy = (size_t)ny;
    return (ptrdiff_t)(v % sx) * a->stride[0] + (ptrdiff_t)(v / sx % sy) * a->stride[1] +
           (ptrdiff_t)(v / (sx * sy)) * a->stride[2];
}

static ptrdiff_t voxel_offset(const dm_problem *p, const dm_array *a, size_t v)
{
    return grid_offset(p->data.nx, p->data.ny, a, v);
}

/* 1 when a is a map of `width` values per voxel on p's grid: X x Y x Z (width 1) or
 * X x Y x Z x width. */
static int on_grid(const dm_problem *p, const dm_array *a, int width)
{
    return (a->ndim == 4 || (a->ndim == 3 && width == 1)) &&
           a->shape[0] == (size_t)p->data.nx && a->shape[1] == (size_t)p->data.ny &&
           a->shape[2] == (size_t)p->data.nz && (a->ndim == 3 || a->shape[3] == (size_t)width);
}

/* Item x (one value, or a map checked to lie on the grid) into dst[i * stride + offset + c]
 * for the voxels to fit. */
static int item_into(dm_problem *p, const dm_fit_item *x, const char *option, int width,
                     double *dst, int stride, int offset)
{
    const dm_array *a = &x->map;
    if (a->ndim == 0) {
        if (width != 1)
            return dm_set_error("%s %s: one value for an input of %d values per voxel: give a "
                                "map",
                                option, x->name, width);
        double v = dm_array_at(a, 0);
        for (size_t i = 0; i < p->nfit; i++) dst[i * stride + offset] = v;
        return 0;
    }
    if (!on_grid(p, a, width))
        return dm_set_error("%s %s: expected a map of %d value%s per voxel on the data's grid "
                            "(%dx%dx%d)",
                            option, x->name, width, width == 1 ? "" : "s", p->data.nx,
                            p->data.ny, p->data.nz);
    const ptrdiff_t st = a->ndim == 4 ? a->stride[3] : 0;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->nfit; i++) {
        ptrdiff_t o = voxel_offset(p, a, p->index[i]);
        for (int c = 0; c < width; c++) dst[i * stride + offset + c] = dm_array_at(a, o + c * st);
    }
    return 0;
}

/* The voxels to fit: the mask's non-zero (and not NaN) voxels, or every voxel. */
static int select_voxels(const dm_fit_inputs *in, dm_problem *p)
{
    const dm_array *m = &in->mask;
    if (!m->data) {
        for (size_t i = 0; i < p->nvox; i++) p->index[p->nfit++] = i;
        return 0;
    }
    const char *name = in->mask_name ? in->mask_name : "mask";
    if (!on_grid(p, m, 1) || m->ndim != 3)
        return dm_set_error("%s: a mask of %zu dimensions (%zux%zux%zu) for data of %dx%dx%d", name,
                            (size_t)m->ndim, m->shape[0], m->shape[1], m->shape[2], p->data.nx,
                            p->data.ny, p->data.nz);
    for (size_t i = 0; i < p->nvox; i++) {
        double v = dm_array_at(m, voxel_offset(p, m, i));
        if (v != 0 && !isnan(v)) p->index[p->nfit++] = i;
    }
    if (p->nfit == 0) return dm_set_error("%s: the mask selects no voxel", name);
    return 0;
}

/* ---- The voxels' signals, gathered here or ahead (fit_inputs.h) ---- */

/* y[i * M + j] = a's value j of voxel index[i] (a linear index into the nx x ny x nz grid),
 * and status_data[index[i]] the status the values alone give: skipped when one is not finite
 * or all are 0, else to be fitted.  On all threads. */
static void gather_signal(const dm_array *a, int nx, int ny, const size_t *index, size_t nfit,
                          size_t M, double *y, unsigned char *status_data)
{
    /* An image stored volume by volume puts each voxel's M values nvox apart: a gather that
     * misses the cache at every value, shared between the cores. */
    const ptrdiff_t st = a->stride[3];
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nfit; i++) {
        double *row = y + i * M;
        const size_t v = index[i];
        const char *base = (const char *)a->data + grid_offset(nx, ny, a, v);
        if (a->type == DM_ARRAY_F32)
            for (size_t j = 0; j < M; j++) row[j] = *(const float *)(base + (ptrdiff_t)j * st);
        else
            for (size_t j = 0; j < M; j++) row[j] = *(const double *)(base + (ptrdiff_t)j * st);
        int finite = 1, nonzero = 0;
        for (size_t j = 0; j < M; j++) {
            if (!isfinite(row[j])) finite = 0;
            if (row[j] != 0) nonzero = 1;
        }
        status_data[v] = !finite    ? DM_STATUS_SKIPPED_NONFINITE
                         : !nonzero ? DM_STATUS_SKIPPED_ZERO
                                    : DM_STATUS_FITTED;
    }
}

/* Signals gathered ahead, under the identity of their image's file and the address of the
 * values they were gathered from (the volume the read-ahead cache hands over to the fit). */
enum { AHEAD_SLOTS = 2, AHEAD_EMPTY = 0, AHEAD_GATHERING, AHEAD_READY };
typedef struct ahead_slot {
    int state;
    unsigned long used; /* the clock of its start: the oldest ready one goes first */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    const void *source;
    size_t nx, ny, nz, M, nfit;
    size_t *index;
    double *y;
    unsigned char *status; /* per voxel of index, its status from the values */
} ahead_slot;
static pthread_mutex_t ahead_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ahead_done = PTHREAD_COND_INITIALIZER;
static ahead_slot ahead_slots[AHEAD_SLOTS];
static unsigned long ahead_clock;

static int same_file(const ahead_slot *s, const struct stat *st)
{
    return s->state != AHEAD_EMPTY && s->dev == st->st_dev && s->ino == st->st_ino &&
           s->size == st->st_size && s->mtime.tv_sec == st->st_mtim.tv_sec &&
           s->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Frees what a slot holds (its signals' buffer, if not taken), under the lock. */
static void slot_empty(ahead_slot *s)
{
    free(s->index);
    free(s->status);
    if (s->y) dm_big_release(s->y, s->nfit * s->M * sizeof *s->y);
    s->index = NULL, s->status = NULL, s->y = NULL;
    s->state = AHEAD_EMPTY;
}

/* What the read-ahead's callback fills: the slot's contents, made outside the lock. */
typedef struct gather_job {
    const dm_volume *mask;
    ahead_slot made;
    int ok;
} gather_job;

static void gather_read(const dm_volume *v, void *ctx)
{
    gather_job *g = ctx;
    const dm_volume *m = g->mask;
    if (v->nt < 2 || v->nx != m->nx || v->ny != m->ny || v->nz != m->nz) return;
    const size_t nvox = DM_NVOX(v), M = (size_t)v->nt;
    size_t *index = malloc(nvox * sizeof *index), n = 0;
    if (!index) return;
    for (size_t i = 0; i < nvox; i++)
        if (m->data[i] != 0 && !isnan(m->data[i])) index[n++] = i;
    unsigned char *status_grid = calloc(nvox, 1), *status = malloc(n ? n : 1);
    double *y = n ? dm_big_reuse(n * M * sizeof *y) : NULL;
    if (!status_grid || !status || !y) {
        free(index), free(status_grid), free(status);
        if (y) dm_big_release(y, n * M * sizeof *y);
        return;
    }
    dm_array a = dm_array_of_volume(v);
    gather_signal(&a, v->nx, v->ny, index, n, M, y, status_grid);
    for (size_t i = 0; i < n; i++) status[i] = status_grid[index[i]];
    free(status_grid);
    ahead_slot *s = &g->made;
    s->source = v->data;
    s->nx = (size_t)v->nx, s->ny = (size_t)v->ny, s->nz = (size_t)v->nz, s->M = M;
    s->nfit = n, s->index = index, s->y = y, s->status = status;
    g->ok = 1;
}

void dm_fit_signal_ahead(const char *data, const char *mask)
{
    struct stat st;
    if (stat(data, &st) != 0 || !S_ISREG(st.st_mode)) return;
    dm_volume m;
    if (!mask || dm_volume_read(mask, &m) != 0) {
        dm_volume_preload(data);
        return;
    }
    pthread_mutex_lock(&ahead_lock);
    ahead_slot *slot = NULL;
    for (int i = 0; i < AHEAD_SLOTS; i++) { /* an empty slot, else the oldest ready one */
        ahead_slot *s = &ahead_slots[i];
        if (s->state == AHEAD_GATHERING) continue;
        if (!slot || s->state == AHEAD_EMPTY ||
            (slot->state != AHEAD_EMPTY && s->used < slot->used))
            slot = s;
    }
    if (slot) {
        slot_empty(slot);
        slot->state = AHEAD_GATHERING;
        slot->used = ++ahead_clock;
        slot->dev = st.st_dev, slot->ino = st.st_ino, slot->size = st.st_size;
        slot->mtime = st.st_mtim;
    }
    pthread_mutex_unlock(&ahead_lock);
    gather_job g = {.mask = &m};
    dm_volume_preload_then(data, slot ? gather_read : NULL, &g);
    dm_volume_free(&m);
    if (!slot) return;
    pthread_mutex_lock(&ahead_lock);
    if (g.ok) {
        g.made.state = AHEAD_READY;
        g.made.used = slot->used;
        g.made.dev = slot->dev, g.made.ino = slot->ino, g.made.size = slot->size;
        g.made.mtime = slot->mtime;
        *slot = g.made;
    } else {
        slot->state = AHEAD_EMPTY;
    }
    pthread_cond_broadcast(&ahead_done);
    pthread_mutex_unlock(&ahead_lock);
}

int dm_fit_signal_ahead_take(const dm_array *a, const char *data_name, dm_problem *p)
{
    struct stat st;
    if (!data_name || a->type != DM_ARRAY_F64 || stat(data_name, &st) != 0) return 0;
    int taken = 0;
    pthread_mutex_lock(&ahead_lock);
    for (int i = 0; i < AHEAD_SLOTS && !taken; i++) {
        ahead_slot *s = &ahead_slots[i];
        while (same_file(s, &st) && s->state == AHEAD_GATHERING)
            pthread_cond_wait(&ahead_done, &ahead_lock);
        if (!same_file(s, &st) || s->state != AHEAD_READY || s->source != a->data ||
            s->nx != (size_t)p->data.nx || s->ny != (size_t)p->data.ny ||
            s->nz != (size_t)p->data.nz || s->M != (size_t)p->M || s->nfit != p->nfit ||
            memcmp(s->index, p->index, p->nfit * sizeof *p->index))
            continue;
        p->y = s->y;
        s->y = NULL;
        for (size_t k = 0; k < p->nfit; k++) p->status_data[p->index[k]] = s->status[k];
        slot_empty(s);
        taken = 1;
    }
    pthread_mutex_unlock(&ahead_lock);
    return taken;
}

void dm_fit_signal_ahead_clear(void)
{
    pthread_mutex_lock(&ahead_lock);
    for (int i = 0; i < AHEAD_SLOTS; i++) {
        while (ahead_slots[i].state == AHEAD_GATHERING)
            pthread_cond_wait(&ahead_done, &ahead_lock);
        slot_empty(&ahead_slots[i]);
    }
    pthread_mutex_unlock(&ahead_lock);
}

/* Per-voxel inputs: the defaults, then the items in order. */
static int voxel_inputs(const dm_fit_inputs *in, dm_problem *p)
{
    const dm_model_info *mi = &p->mi;
    const char *option = in->voxel_option ? in->voxel_option : "voxel";
    for (int i = 0; i < mi->nvoxels; i++) {
        const dm_voxel_info *x = &mi->voxels[i];
        if (!find_item(&in->voxel, x->name) && isnan(x->default_value))
            return dm_set_error("model '%s' needs per-voxel input '%s': give %s %s=MAP", mi->name,
                                x->name, option, x->name);
        for (size_t v = 0; v < p->nfit; v++)
            for (int c = 0; c < x->width; c++)
                p->voxin[v * mi->voxel_width + x->column + c] = x->default_value;
    }
    for (int k = 0; k < in->voxel.n; k++) {
        const dm_fit_item *x = &in->voxel.item[k];
        int i = 0;
        while (i < mi->nvoxels && strcmp(mi->voxels[i].name, x->name)) i++;
        if (i == mi->nvoxels)
            return dm_set_error("%s: model '%s' has no per-voxel input '%s'", option, mi->name,
                                x->name);
        if (item_into(p, x, option, mi->voxels[i].width, p->voxin, mi->voxel_width,
                      mi->voxels[i].column) != 0)
            return -1;
    }
    return 0;
}

size_t dm_problem_signal_bytes(const dm_problem *p)
{
    return (p->nfit ? p->nfit : 1) * p->M * sizeof *p->y;
}

int dm_problem_build(const dm_fit_request *r, const dm_model_info *mi, const dm_fit_inputs *in,
                     dm_volume *geometry, dm_problem *p)
{
    memset(p, 0, sizeof *p);
    p->mi = *mi;
    p->mi.source = mi->source ? strdup(mi->source) : NULL;
    if (mi->source && !p->mi.source) return dm_set_error("out of memory");
    if (geometry) {
        p->data = *geometry; /* taken over: the outputs are written with its header */
        memset(geometry, 0, sizeof *geometry);
    }
    const dm_array *a = &in->data;
    const char *name = in->data_name ? in->data_name : "data";
    if (!a->data || a->ndim != 4 || (a->type != DM_ARRAY_F32 && a->type != DM_ARRAY_F64))
        return dm_set_error("%s: expected a 4D array of float32 or float64 values (X x Y x Z x "
                            "volumes)",
                            name);
    if (a->shape[3] < 2)
        return dm_set_error("%s: %zu volume: a fit needs one volume per measurement", name,
                            a->shape[3]);
    for (int k = 0; k < 3; k++)
        if (a->shape[k] < 1 || a->shape[k] > (1u << 30))
            return dm_set_error("%s: %zu voxels along axis %d", name, a->shape[k], k);
    if (a->shape[3] > (1u << 20))
        return dm_set_error("%s: %zu volumes (at most %u)", name, a->shape[3], 1u << 20);
    p->data.nx = (int)a->shape[0];
    p->data.ny = (int)a->shape[1];
    p->data.nz = (int)a->shape[2];
    p->data.nt = (int)a->shape[3];
    p->M = p->data.nt;
    p->nvox = DM_NVOX(&p->data);
    if (dm_fit_measurements(&p->mi, in, p->M, &p->meas, &p->bvals) != 0) return -1;

    p->index = malloc(p->nvox * sizeof *p->index);
    p->status = calloc(p->nvox, 1);
    p->status_data = calloc(p->nvox, 1);
    if (!p->index || !p->status || !p->status_data)
        return dm_set_error("%s: out of memory for %zu voxels", name, p->nvox);
    if (select_voxels(in, p) != 0) return -1;
    dm_part_select_voxels(&r->part, p->index, &p->nfit, p->nvox, &p->own_first, &p->own_end);

    const size_t M = p->M;
    const int VW = p->mi.voxel_width;
    /* The signals gathered ahead when there are some (dimoc bids), else here.  (A subject's
     * signals are hundreds of MB: huge pages fault them in a thousand times less often.) */
    const int ahead = dm_fit_signal_ahead_take(a, in->data_name, p);
    if (!ahead) p->y = dm_big_reuse(dm_problem_signal_bytes(p));
    p->voxin = calloc((p->nfit ? p->nfit : 1) * (VW ? VW : 1), sizeof *p->voxin);
    if (!p->y || !p->voxin)
        return dm_set_error("%s: out of memory for %zu voxels of %zu measurements", name, p->nfit,
                            M);
    if (!ahead)
        gather_signal(a, p->data.nx, p->data.ny, p->index, p->nfit, M, p->y, p->status_data);
    memcpy(p->status, p->status_data, p->nvox);
    if (p->bvals && check_b_scale(p, in->b_name ? in->b_name : "bvals") != 0) return -1;
    return voxel_inputs(in, p);
}

/* Starting values a hair outside their bounds (a float32 map of an earlier fit rounds 63.99999
 * up to an open bound of 64) are moved just inside, so the stage can start there. */
static void clamp_starts(dm_problem *p)
{
    const dm_model_info *mi = &p->mi;
    const int P = mi->nparams;
    /* (on all threads: a stage of a cascade starts with it, and a subject has millions) */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->nfit; i++)
        for (int k = 0; k < P; k++)
            p->start[i * P + k] = dm_fit_clamp_start(&mi->params[k], p->start[i * P + k]);
}

/* Whether start item i came from --init-from's folder. */
static int from_dir(const dm_fit_items *starts, int i)
{
    return i < 32 && ((starts->from_dir >> i) & 1u);
}

/* A start item: a value (within the parameter's bounds) or a map into p->start. */
static int set_start(dm_problem *p, const dm_fit_item *x, const char *option, unsigned *given)
{
    const int P = p->mi.nparams;
    int k = dm_model_param_index(&p->mi, x->name);
    if (k < 0)
        return dm_set_error("%s: model '%s' has no parameter '%s'", option, p->mi.name, x->name);
    *given |= 1u << k;
    if (x->map.ndim != 0) return item_into(p, x, option, 1, p->start, P, k);
    double v = dm_array_at(&x->map, 0);
    const dm_param_info *q = &p->mi.params[k];
    int above = q->lo_closed ? v >= q->lo : v > q->lo;
    int below = q->hi_closed ? v <= q->hi : v < q->hi;
    if (!isfinite(v) || !above || !below)
        return dm_set_error("%s %s=%s: outside the bounds %c%g, %g%c of '%s' in model '%s'", option,
                            x->name, x->text, q->lo_closed ? '[' : '(', q->lo, q->hi,
                            q->hi_closed ? ']' : ')', x->name, p->mi.name);
    for (size_t i = 0; i < p->nfit; i++) p->start[i * P + k] = v;
    return 0;
}

int dm_problem_stage_items(const dm_fit_request *r, const double *prev, const dm_fit_items *starts,
                           const char *init_option, dm_problem *p)
{
    const dm_model_info *mi = &p->mi;
    int P = mi->nparams;
    unsigned every = P >= 32 ? ~0u : (1u << P) - 1;
    const dm_fit_items none = {0};
    if (!starts) starts = &none;
    if (!init_option) init_option = "--init";
    /* A stage starts afresh: the status from the data alone, no starts, no settings. */
    memcpy(p->status, p->status_data, p->nvox);
    memset(&p->cfg, 0, sizeof p->cfg);
    free(p->grid_values);
    p->grid_values = NULL;
    p->ngrid_values = 0;
    dm_fit_starts_finish(p);
    /* One buffer for every stage of a cascade: a fresh one's pages fault in as its millions of
     * starts are written, on the stage's path. */
    const size_t start_bytes = (p->nfit ? p->nfit : 1) * P * sizeof *p->start;
    if (p->start_bytes < start_bytes) {
        free(p->start);
        p->start = malloc(start_bytes);
        p->start_bytes = p->start ? start_bytes : 0;
    }
    /* The volume count against the free parameters, before the starts (which may warn). */
    if (set_fixed(p, r->fixed) != 0 || set_samples_of(p, r->samples_of) != 0) return -1;
    int nfree = 0;
    for (int k = 0; k < P; k++) nfree += !((p->cfg.fixed_mask >> k) & 1u);
    if (p->M < nfree)
        return dm_set_error("%s: %d volumes but model '%s' has %d free parameters: a fit needs at "
                            "least one measurement per free parameter",
                            r->data, p->M, mi->name, nfree);
    /* The parameters the items set need no start from the data: a cascade's later stages take
     * the orientation from the maps before them, and the tensor fit per voxel would be thrown
     * away. */
    unsigned given = 0;
    for (int i = 0; i < starts->n; i++) {
        int k = dm_model_param_index(mi, starts->item[i].name);
        if (k >= 0) given |= 1u << k;
    }
    if (!prev) dm_fit_starts(p, given); /* prev overwrites every start */
    given = 0;
    if (prev) { /* the previous stage's maps, as --init-from would read them */
        dm_big_copy(p->start, prev, p->nfit * P * sizeof *p->start);
        given = every;
    }
    /* --init-from's maps first, then --init's in order */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < starts->n; i++)
            if (from_dir(starts, i) == (pass == 0) &&
                set_start(p, &starts->item[i], init_option, &given) != 0)
                return -1;
    clamp_starts(p);

    dm_fit_config *cfg = &p->cfg;
    cfg->nmeas = p->M;
    if (dm_fit_parse_methods(r->methods, &cfg->methods) != 0) return -1;
    dm_fit_multistart_config(p, given);
    struct grid_ctx gc = {p, 0};
    if (dm_fit_for_each_item(r->grid, "--grid", add_grid, &gc) != 0) return -1;
    if ((cfg->methods & DM_METHOD_GRID) && p->ngrid_values == 0)
        return dm_set_error("--method grid needs at least one --grid NAME=VALUES");
    if ((cfg->methods & DM_METHOD_DICT) && p->ngrid_values == 0)
        return dm_set_error("--method dictionary needs --grid NAME=VALUES for the model's "
                            "non-linear parameters (the fractions are solved for)");
    p->dict_lambda[0] = 0.5; /* AMICO 2's NODDI penalties (its set_solver's defaults) */
    p->dict_lambda[1] = 1e-3;
    if (r->dictionary_penalty) {
        char tail;
        if (sscanf(r->dictionary_penalty, "%lf,%lf%c", &p->dict_lambda[0], &p->dict_lambda[1],
                   &tail) != 2 ||
            !(p->dict_lambda[0] >= 0) || !(p->dict_lambda[1] >= 0))
            return dm_set_error("--dictionary-penalty: '%s' is not L1,L2 (two numbers >= 0)",
                                r->dictionary_penalty);
    }
    if (!(cfg->methods & (DM_METHOD_GRID | DM_METHOD_DICT)) && p->ngrid_values > 0)
        cfg->methods |= DM_METHOD_GRID; /* a grid given means a grid search */
    if (!strcmp(r->noise, "gaussian"))
        cfg->noise = DM_NOISE_GAUSSIAN;
    else if (!strcmp(r->noise, "rician"))
        cfg->noise = DM_NOISE_RICIAN;
    else
        return dm_set_error("--noise: '%s' is neither gaussian nor rician", r->noise);
    cfg->lm_max_iter = (int)r->lm_iterations;
    cfg->burnin = (int)r->burnin;
    cfg->jumps = (int)r->jumps;
    cfg->sample_every = (int)r->sample_every;
    cfg->update_every = (int)r->update_every;
    cfg->seed = r->seed;
    if ((cfg->methods & DM_METHOD_MCMC) && DM_NSAMPLES(cfg) < 1)
        return dm_set_error("--jumps %d with --sample-every %d keeps no sample", cfg->jumps,
                            cfg->sample_every);
    return 0;
}

void dm_problem_free(dm_problem *p)
{
    dm_fit_starts_finish(p);
    dm_model_info_free(&p->mi);
    if (p->free_data) p->free_data(&p->data); /* the reader's image (fit_files.c) */
    free(p->meas);
    free(p->bvals);
    free(p->index);
    dm_big_release(p->y, dm_problem_signal_bytes(p));
    free(p->voxin);
    free(p->start);
    free(p->status);
    free(p->status_data);
    free(p->grid_values);
    memset(p, 0, sizeof *p);
}
