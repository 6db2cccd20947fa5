/* Planning a fit: reading and checking every input, choosing the voxels, setting starts. */
#include "util/error.h"
#include "fit/fit.h"
#include "fit/fit_starts.h"
#include "util/fsutil.h"
#include "io/space.h"
#include "io/gradients.h"
#include "io/scheme_file.h"
#include "io/textio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Splits "a=1,2,b=x;c=y" into NAME=VALUES items: a token holding '=' starts a new item,
 * a token without one continues the previous item's value list.  Calls fn for each item. */
typedef int (*item_fn)(void *ctx, const char *name, const char *values);
static int for_each_item(const char *spec, const char *what, item_fn fn, void *ctx)
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

/* Finds NAME's value in a NAME=VALUE spec; NULL when absent (static buffer). */
struct lookup_ctx {
    const char *name;
    char value[4096];
    int found;
};
static int lookup_item(void *ctx, const char *name, const char *values)
{
    struct lookup_ctx *c = ctx;
    if (!strcmp(name, c->name)) {
        snprintf(c->value, sizeof c->value, "%s", values);
        c->found = 1;
    }
    return 0;
}

/* Reads a per-measurement input file: nvol rows of `width` numbers (or the transpose). */
static int read_measure_file(const char *path, const char *name, int width, int nvol, double *meas,
                             int stride, int column)
{
    int rows, cols;
    double *d;
    if (dm_read_matrix(path, &rows, &cols, &d) != 0) return -1;
    int transposed = 0;
    if (rows == nvol && cols == width)
        transposed = 0;
    else if (cols == nvol && rows == width)
        transposed = 1;
    else {
        free(d);
        return dm_set_error("%s: measure '%s' needs %d value%s per volume for %d volumes, the file "
                            "has %d x %d",
                            path, name, width, width == 1 ? "" : "s", nvol, rows, cols);
    }
    for (int j = 0; j < nvol; j++)
        for (int c = 0; c < width; c++)
            meas[(size_t)j * stride + column + c] =
                transposed ? d[(size_t)c * nvol + j] : d[(size_t)j * width + c];
    free(d);
    return 0;
}

/* --measure NAME=FILE names a per-measurement input the model reads from a file. */
static int known_measure(void *ctx, const char *name, const char *values)
{
    const dm_model_info *mi = ctx;
    (void)values;
    for (int i = 0; i < mi->nmeasures; i++) {
        if (strcmp(mi->measures[i].name, name)) continue;
        if (mi->measures[i].source == DM_SRC_FILE) return 0;
        return dm_set_error("--measure %s: model '%s' reads '%s' from %s, not from --measure", name,
                            mi->name, name,
                            mi->measures[i].source == DM_SRC_BVALS   ? "--bvals"
                            : mi->measures[i].source == DM_SRC_BVECS ? "--bvecs"
                                                                     : "--scheme");
    }
    return dm_set_error("--measure: model '%s' has no per-measurement input '%s'", mi->name, name);
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

/* The measures read from scheme columns into meas (nvol rows of stride values).  Every such
 * measure is checked before the file is read, so that a missing --scheme is reported as such;
 * a file the model does not need is not read. */
static int read_scheme_measures(const dm_model_info *mi, const char *scheme, int nvol, double *meas,
                                int stride)
{
    int needed = 0;
    for (int i = 0; i < mi->nmeasures; i++) {
        const dm_measure_info *x = &mi->measures[i];
        if (x->source != DM_SRC_SCHEME) continue;
        needed = 1;
        if (!scheme)
            return dm_set_error("%s:%d:%d: measure '%s' reads column '%s' of a scheme file: give "
                                "--scheme FILE",
                                mi->file, x->line, x->col, x->name, x->scheme_column);
    }
    if (!needed) return 0;
    dm_scheme sch;
    if (dm_scheme_read(scheme, &sch) != 0) return -1;
    int rc = 0;
    if (sch.rows != nvol)
        rc = dm_set_error("%s: %d row%s, but the data have %d volume%s (one row per volume)",
                          scheme, sch.rows, sch.rows == 1 ? "" : "s", nvol, nvol == 1 ? "" : "s");
    for (int i = 0; i < mi->nmeasures && rc == 0; i++) {
        const dm_measure_info *x = &mi->measures[i];
        if (x->source != DM_SRC_SCHEME) continue;
        int c = dm_scheme_column(&sch, x->scheme_column);
        if (c < 0) {
            char names[512];
            dm_scheme_names(&sch, names, sizeof names);
            rc = dm_set_error("%s:%d:%d: the scheme file '%s' has no column '%s' (it has: %s)",
                              mi->file, x->line, x->col, scheme, x->scheme_column, names);
            break;
        }
        for (int j = 0; j < nvol; j++)
            meas[(size_t)j * stride + x->column] = sch.values[(size_t)j * sch.cols + c];
    }
    dm_scheme_free(&sch);
    return rc;
}

/* dm_build_measurements, with the gradient table from the first source given (io/gradients.h)
 * when `data` (read from data_path) is given; from FSL's files alone without it. */
static int build_measurements(const dm_model_info *mi, const dm_grad_files *grads,
                              const dm_volume *data, const char *data_path,
                              const char *measure_spec, const char *scheme, int nvol,
                              double **meas_out, double **bvals_out)
{
    const char *bvals = grads->bvals, *bvecs = grads->bvecs;
    if (for_each_item(measure_spec, "--measure", known_measure, (void *)mi) != 0) return -1;
    int W = mi->measure_width;
    double *meas = calloc((size_t)nvol * (W ? W : 1), sizeof *meas);
    double *b = NULL, *g = NULL;
    int need_bv = 0;
    for (int i = 0; i < mi->nmeasures; i++)
        if (mi->measures[i].source == DM_SRC_BVALS || mi->measures[i].source == DM_SRC_BVECS)
            need_bv = 1;
    if (read_scheme_measures(mi, scheme, nvol, meas, W) != 0) {
        free(meas);
        return -1;
    }
    if (bvals_out) *bvals_out = NULL;
    if (need_bv) {
        if (!data && (!bvals || !bvecs)) {
            free(meas);
            return dm_set_error("model '%s' reads b-values and gradient directions: give --bvals "
                                "and --bvecs",
                                mi->name);
        }
        int n, reads_b = 0, reads_g = 0;
        const char *table = NULL;
        if (data ? dm_read_gradients(grads, data, data_path, &b, &g, &table)
                 : dm_read_bvals_bvecs(bvals, bvecs, nvol, &b, &g, &n)) {
            free(meas);
            return -1;
        }
        if (!bvals) bvals = table; /* for messages: where the table came from */
        if (!bvecs) bvecs = table;
        for (int i = 0; i < mi->nmeasures; i++) {
            reads_b |= mi->measures[i].source == DM_SRC_BVALS;
            reads_g |= mi->measures[i].source == DM_SRC_BVECS;
        }
        if (check_weighting(bvals, bvecs, b, g, nvol, reads_b, reads_g) != 0) goto fail;
    }
    for (int i = 0; i < mi->nmeasures; i++) {
        const dm_measure_info *x = &mi->measures[i];
        if (x->source == DM_SRC_BVALS || x->source == DM_SRC_BVECS) {
            int from_vecs = x->source == DM_SRC_BVECS;
            int w = from_vecs ? 3 : 1;
            if (x->width != w) {
                free(meas);
                free(b);
                free(g);
                return dm_set_error("model '%s': measure '%s' has width %d but %s give %d",
                                    mi->name, x->name, x->width, from_vecs ? "bvecs" : "bvals", w);
            }
            for (int j = 0; j < nvol; j++)
                for (int c = 0; c < w; c++)
                    meas[(size_t)j * W + x->column + c] = from_vecs ? g[3 * j + c] : b[j];
        } else if (x->source == DM_SRC_FILE) {
            struct lookup_ctx lc = {.name = x->name};
            if (for_each_item(measure_spec, "--measure", lookup_item, &lc) != 0) goto fail;
            if (!lc.found) {
                dm_set_error("model '%s' needs per-measurement input '%s': give --measure %s=FILE",
                             mi->name, x->name, x->name);
                goto fail;
            }
            if (read_measure_file(lc.value, x->name, x->width, nvol, meas, W, x->column) != 0)
                goto fail;
        }
    }
    free(g);
    if (bvals_out)
        *bvals_out = b;
    else
        free(b);
    *meas_out = meas;
    return 0;
fail:
    free(meas);
    free(b);
    free(g);
    return -1;
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

/* Reads a 3D map on the data's grid into dst[v * stride + offset] for the masked voxels. */
static int read_map_into(dm_problem *p, const char *path, int width, double *dst, int stride,
                         int offset)
{
    dm_volume v;
    if (dm_volume_read(path, &v) != 0) return -1;
    int rc = dm_volume_check_same_grid(&v, path, &p->data, "the data");
    if (rc == 0 && v.nt != width)
        rc = dm_set_error("%s: expected %d volume%s, found %d", path, width, width == 1 ? "" : "s",
                          v.nt);
    if (rc == 0)
        for (size_t i = 0; i < p->nfit; i++)
            for (int c = 0; c < width; c++)
                dst[i * stride + offset + c] = v.data[p->index[i] + (size_t)c * p->nvox];
    dm_volume_free(&v);
    return rc;
}

struct init_ctx {
    dm_problem *p;
    unsigned given; /* bit k: parameter k was set */
};
static int set_init(void *ctx, const char *name, const char *value)
{
    dm_problem *p = ((struct init_ctx *)ctx)->p;
    int P = p->mi.nparams;
    int k = dm_model_param_index(&p->mi, name);
    if (k < 0) return dm_set_error("--init: model '%s' has no parameter '%s'", p->mi.name, name);
    ((struct init_ctx *)ctx)->given |= 1u << k;
    char *end;
    double x = strtod(value, &end);
    if (*value && !*end) {
        const dm_param_info *q = &p->mi.params[k];
        int above = q->lo_closed ? x >= q->lo : x > q->lo;
        int below = q->hi_closed ? x <= q->hi : x < q->hi;
        if (!isfinite(x) || !above || !below)
            return dm_set_error("--init %s=%s: outside the bounds %c%g, %g%c of '%s' in model '%s'",
                                name, value, q->lo_closed ? '[' : '(', q->lo, q->hi,
                                q->hi_closed ? ']' : ')', name, p->mi.name);
        for (size_t i = 0; i < p->nfit; i++) p->start[i * P + k] = x;
        return 0;
    }
    return read_map_into(p, value, 1, p->start, P, k);
}

struct voxel_ctx {
    dm_problem *p;
};
static int set_voxel(void *ctx, const char *name, const char *value)
{
    dm_problem *p = ((struct voxel_ctx *)ctx)->p;
    const dm_model_info *mi = &p->mi;
    for (int i = 0; i < mi->nvoxels; i++) {
        if (strcmp(mi->voxels[i].name, name)) continue;
        char *end;
        double x = strtod(value, &end);
        if (*value && !*end && mi->voxels[i].width == 1) {
            for (size_t v = 0; v < p->nfit; v++)
                p->voxin[v * mi->voxel_width + mi->voxels[i].column] = x;
            return 0;
        }
        return read_map_into(p, value, mi->voxels[i].width, p->voxin, mi->voxel_width,
                             mi->voxels[i].column);
    }
    return dm_set_error("--voxel: model '%s' has no per-voxel input '%s'", mi->name, name);
}

/* The map of parameter k in an --init-from folder (malloc'd path). */
static char *init_map_path(const dm_problem *p, const char *dir, int k)
{
    return dm_volume_find(dir, p->mi.params[k].name);
}

static int note_init_name(void *ctx, const char *name, const char *value)
{
    (void)value;
    struct init_ctx *ic = ctx;
    int k = dm_model_param_index(&ic->p->mi, name);
    if (k >= 0) ic->given |= 1u << k;
    return 0; /* an unknown name is set_init's error, later */
}

/* The parameters whose starts --init or --init-from will set (bit k), so that the data-driven
 * starts need not compute theirs: a cascade's later stages take the orientation from the maps
 * before them, and the tensor fit per voxel would be thrown away. */
static unsigned supplied_starts(dm_problem *p, const dm_fit_request *r)
{
    struct init_ctx ic = {p, 0};
    for (int k = 0; r->init_from && k < p->mi.nparams; k++) {
        char *path = init_map_path(p, r->init_from, k);
        if (access(path, R_OK) == 0) ic.given |= 1u << k;
        free(path);
    }
    for_each_item(r->init, "--init", note_init_name, &ic);
    return ic.given;
}

static int init_from_dir(dm_problem *p, const char *dir, unsigned *given)
{
    int found = 0;
    for (int k = 0; k < p->mi.nparams; k++) {
        char *path = init_map_path(p, dir, k);
        if (access(path, R_OK) == 0) {
            int rc = read_map_into(p, path, 1, p->start, p->mi.nparams, k);
            free(path);
            if (rc != 0) return -1;
            *given |= 1u << k;
            found++;
        } else {
            free(path);
        }
    }
    if (!found)
        return dm_set_error("--init-from %s: no map named after a parameter of '%s' there", dir,
                            p->mi.name);
    return 0;
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

/* Starting values a hair outside their bounds (a float32 map of an earlier fit rounds 63.99999
 * up to an open bound of 64) are moved just inside, so the stage can start there. */
static void clamp_starts(dm_problem *p)
{
    const dm_model_info *mi = &p->mi;
    for (int k = 0; k < mi->nparams; k++)
        for (size_t i = 0; i < p->nfit; i++)
            p->start[i * mi->nparams + k] =
                dm_fit_clamp_start(&mi->params[k], p->start[i * mi->nparams + k]);
}

int dm_build_measurements(const dm_model_info *mi, const char *bvals, const char *bvecs,
                          const char *measure_spec, const char *scheme, int nvol, double **meas_out,
                          double **bvals_out)
{
    const dm_grad_files grads = {bvals, bvecs, NULL};
    return build_measurements(mi, &grads, NULL, NULL, measure_spec, scheme, nvol, meas_out,
                              bvals_out);
}

int dm_problem_load(const dm_fit_request *r, dm_problem *p)
{
    memset(p, 0, sizeof *p);
    if (dm_model_load(r->model, &p->mi) != 0) return -1;
    const dm_model_info *mi = &p->mi;
    if (!r->data) return dm_set_error("--data is required");
    if (!r->out) return dm_set_error("--out is required");
    if (dm_volume_read(r->data, &p->data) != 0) return -1;
    if (p->data.nt == 1)
        return dm_set_error("%s: a 3D image (%dx%dx%d): --data needs one volume per measurement, "
                            "a 4D image",
                            r->data, p->data.nx, p->data.ny, p->data.nz);
    p->M = p->data.nt;
    p->nvox = DM_NVOX(&p->data);
    const dm_grad_files grads = {r->bvals, r->bvecs, r->grad};
    if (build_measurements(mi, &grads, &p->data, r->data, r->measure, r->scheme, p->M, &p->meas,
                           &p->bvals) != 0)
        return -1;

    /* The voxels to fit: the mask's non-zero voxels, or every voxel. */
    p->index = malloc(p->nvox * sizeof *p->index);
    p->status = calloc(p->nvox, 1);
    p->status_data = calloc(p->nvox, 1);
    if (r->mask) {
        dm_volume m;
        if (dm_volume_read(r->mask, &m) != 0) return -1;
        int rc = m.nt > 1 ? dm_set_error("%s: a 4D image (%dx%dx%dx%d); a mask is 3D", r->mask,
                                         m.nx, m.ny, m.nz, m.nt)
                          : dm_volume_check_same_space(&m, r->mask, &p->data, r->data);
        if (rc != 0) {
            dm_volume_free(&m);
            return -1;
        }
        for (size_t i = 0; i < p->nvox; i++)
            if (m.data[i] != 0 && !isnan(m.data[i])) p->index[p->nfit++] = i;
        dm_volume_free(&m);
        if (p->nfit == 0) return dm_set_error("%s: the mask selects no voxel", r->mask);
    } else {
        for (size_t i = 0; i < p->nvox; i++) p->index[p->nfit++] = i;
    }
    dm_part_select_voxels(&r->part, p->index, &p->nfit, p->nvox, &p->own_first, &p->own_end);

    size_t M = p->M;
    p->y = malloc(p->nfit * M * sizeof *p->y);
    p->voxin = calloc(p->nfit * (mi->voxel_width ? mi->voxel_width : 1), sizeof *p->voxin);
    /* The image is stored volume by volume, so each voxel's M values lie nvox apart: a gather
     * that misses the cache at every value, shared between the cores. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->nfit; i++) {
        double *y = p->y + i * M;
        int finite = 1, nonzero = 0;
        for (size_t j = 0; j < M; j++) {
            y[j] = p->data.data[p->index[i] + j * p->nvox];
            if (!isfinite(y[j])) finite = 0;
            if (y[j] != 0) nonzero = 1;
        }
        p->status_data[p->index[i]] = !finite    ? DM_STATUS_SKIPPED_NONFINITE
                                      : !nonzero ? DM_STATUS_SKIPPED_ZERO
                                                 : DM_STATUS_FITTED;
    }
    memcpy(p->status, p->status_data, p->nvox);
    if (p->bvals && check_b_scale(p, r->bvals ? r->bvals : r->grad ? r->grad : r->data) != 0)
        return -1;
    /* Per-voxel inputs: defaults, then --voxel maps. */
    for (int i = 0; i < mi->nvoxels; i++) {
        const dm_voxel_info *x = &mi->voxels[i];
        struct lookup_ctx lc = {.name = x->name};
        if (for_each_item(r->voxel, "--voxel", lookup_item, &lc) != 0) return -1;
        if (!lc.found && isnan(x->default_value))
            return dm_set_error("model '%s' needs per-voxel input '%s': give --voxel %s=MAP",
                                mi->name, x->name, x->name);
        for (size_t v = 0; v < p->nfit; v++)
            for (int c = 0; c < x->width; c++)
                p->voxin[v * mi->voxel_width + x->column + c] = x->default_value;
    }
    struct voxel_ctx vc = {p};
    if (for_each_item(r->voxel, "--voxel", set_voxel, &vc) != 0) return -1;
    return 0;
}

int dm_problem_stage(const dm_fit_request *r, const double *prev, dm_problem *p)
{
    const dm_model_info *mi = &p->mi;
    int P = mi->nparams;
    unsigned every = P >= 32 ? ~0u : (1u << P) - 1;
    if (!r->out) return dm_set_error("--out is required");
    /* A stage starts afresh: the status from the data alone, no starts, no settings. */
    memcpy(p->status, p->status_data, p->nvox);
    memset(&p->cfg, 0, sizeof p->cfg);
    free(p->grid_values);
    p->grid_values = NULL;
    p->ngrid_values = 0;
    dm_fit_starts_finish(p);
    free(p->start);
    p->start = malloc(p->nfit * P * sizeof *p->start);
    /* The volume count against the free parameters, before the starts (which may warn). */
    if (set_fixed(p, r->fixed) != 0) return -1;
    int nfree = 0;
    for (int k = 0; k < P; k++) nfree += !((p->cfg.fixed_mask >> k) & 1u);
    if (p->M < nfree)
        return dm_set_error("%s: %d volumes but model '%s' has %d free parameters: a fit needs at "
                            "least one measurement per free parameter",
                            r->data, p->M, mi->name, nfree);
    struct init_ctx ic = {p, 0};
    if (!prev) dm_fit_starts(p, supplied_starts(p, r)); /* prev overwrites every start */
    if (prev) { /* the previous stage's maps, as --init-from would read them */
        memcpy(p->start, prev, p->nfit * P * sizeof *p->start);
        ic.given = every;
    } else if (r->init_from && init_from_dir(p, r->init_from, &ic.given) != 0) {
        return -1;
    }
    if (for_each_item(r->init, "--init", set_init, &ic) != 0) return -1;
    clamp_starts(p);

    dm_fit_config *cfg = &p->cfg;
    cfg->nmeas = p->M;
    if (dm_fit_parse_methods(r->methods, &cfg->methods) != 0) return -1;
    dm_fit_multistart_config(p, ic.given);
    struct grid_ctx gc = {p, 0};
    if (for_each_item(r->grid, "--grid", add_grid, &gc) != 0) return -1;
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

int dm_problem_plan(const dm_fit_request *r, dm_problem *p)
{
    if (dm_problem_load(r, p) != 0) return -1;
    return dm_problem_stage(r, NULL, p);
}

void dm_problem_free(dm_problem *p)
{
    dm_fit_starts_finish(p);
    dm_model_info_free(&p->mi);
    dm_volume_free(&p->data);
    free(p->meas);
    free(p->bvals);
    free(p->index);
    free(p->y);
    free(p->voxin);
    free(p->start);
    free(p->status);
    free(p->status_data);
    free(p->grid_values);
    memset(p, 0, sizeof *p);
}
