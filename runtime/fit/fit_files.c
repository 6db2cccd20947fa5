/* The command's side of a fit (fit_inputs.h): the reader (the data, the mask, the gradient
 * table, --measure files, --scheme columns, --voxel and --init maps, --init-from's folder read
 * and checked into the arrays that the builder, fit_plan.c, takes), the writer of the maps
 * into files, and `dimoc fit`'s run of the engine (fit_run.c) over them.  A run in memory (the
 * C API) links none of this. */
#include "fit/fit_inputs.h"
#include "fit/fit_outputs.h"
#include "io/bigalloc.h"
#include "io/gradients.h"
#include "io/scheme_file.h"
#include "io/space.h"
#include "io/textio.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dm_fit_items_free(dm_fit_items *it)
{
    for (int i = 0; i < it->n; i++) {
        dm_volume_free(&it->item[i].owned);
        free(it->item[i].rows);
    }
    free(it->item);
    memset(it, 0, sizeof *it);
}

void dm_fit_files_free(dm_fit_files *f)
{
    dm_fit_items_free(&f->in.measures);
    dm_fit_items_free(&f->in.voxel);
    dm_volume_free(&f->mask);
    free(f->b);
    free(f->g);
    memset(f, 0, sizeof *f);
}

/* A new item named `name`, its text `text` (zeroed otherwise). */
static dm_fit_item *add_item(dm_fit_items *it, const char *name, const char *text)
{
    dm_fit_item *more = realloc(it->item, (size_t)(it->n + 1) * sizeof *more);
    if (!more) {
        dm_set_error("out of memory");
        return NULL;
    }
    it->item = more;
    dm_fit_item *x = &it->item[it->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->text, sizeof x->text, "%s", text);
    return x;
}

/* An item of one value. */
static int add_value(dm_fit_items *it, const char *name, const char *text, double v)
{
    dm_fit_item *x = add_item(it, name, text);
    if (!x || !(x->rows = malloc(sizeof *x->rows))) return dm_set_error("out of memory");
    x->rows[0] = v;
    x->map = (dm_array){x->rows, DM_ARRAY_F64, 0, {0}, {0}};
    return 0;
}

/* An item of nvol rows of `width` values (rows malloc'd, taken over). */
static int add_rows(dm_fit_items *it, const char *name, const char *text, double *rows, int nvol,
                    int width)
{
    dm_fit_item *x = add_item(it, name, text);
    if (!x) {
        free(rows);
        return -1;
    }
    x->rows = rows;
    x->map = (dm_array){rows, DM_ARRAY_F64, 2, {(size_t)nvol, (size_t)width},
                        {(ptrdiff_t)(width * sizeof(double)), sizeof(double)}};
    return 0;
}

/* An item of a 3D map (width 1) or a 4D one of `width` volumes on `grid`'s grid, read from
 * path (the grid and the volume count checked). */
static int add_map(dm_fit_items *it, const char *name, const char *path, int width,
                   const dm_volume *grid)
{
    dm_volume v;
    if (dm_volume_read(path, &v) != 0) return -1;
    int rc = dm_volume_check_same_grid(&v, path, grid, "the data");
    if (rc == 0 && v.nt != width)
        rc = dm_set_error("%s: expected %d volume%s, found %d", path, width, width == 1 ? "" : "s",
                          v.nt);
    dm_fit_item *x = rc == 0 ? add_item(it, name, path) : NULL;
    if (!x) {
        dm_volume_free(&v);
        return -1;
    }
    x->owned = v;
    x->map = dm_array_of_volume(&x->owned);
    return 0;
}

/* NAME's value in a NAME=VALUE spec. */
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

/* Reads a per-measurement input file: nvol rows of `width` numbers (or the transpose), as
 * rows of width values (malloc'd). */
static int read_measure_file(const char *path, const char *name, int width, int nvol,
                             double **rows)
{
    int nr, nc;
    double *d;
    if (dm_read_matrix(path, &nr, &nc, &d) != 0) return -1;
    int transposed = 0;
    if (nr == nvol && nc == width)
        transposed = 0;
    else if (nc == nvol && nr == width)
        transposed = 1;
    else {
        free(d);
        return dm_set_error("%s: measure '%s' needs %d value%s per volume for %d volumes, the file "
                            "has %d x %d",
                            path, name, width, width == 1 ? "" : "s", nvol, nr, nc);
    }
    double *out = malloc((size_t)nvol * width * sizeof *out);
    if (!out) {
        free(d);
        return dm_set_error("%s: out of memory", path);
    }
    for (int j = 0; j < nvol; j++)
        for (int c = 0; c < width; c++)
            out[(size_t)j * width + c] =
                transposed ? d[(size_t)c * nvol + j] : d[(size_t)j * width + c];
    free(d);
    *rows = out;
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

/* The measures read from scheme columns, an item each (nvol rows of one value).  Every such
 * measure is checked before the file is read, so that a missing --scheme is reported as such;
 * a file the model does not need is not read. */
static int read_scheme_measures(const dm_model_info *mi, const char *scheme, int nvol,
                                dm_fit_items *items)
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
        double *rows = malloc((size_t)nvol * sizeof *rows);
        if (!rows) {
            rc = dm_set_error("%s: out of memory", scheme);
            break;
        }
        for (int j = 0; j < nvol; j++) rows[j] = sch.values[(size_t)j * sch.cols + c];
        rc = add_rows(items, x->name, scheme, rows, nvol, 1);
    }
    dm_scheme_free(&sch);
    return rc;
}

/* The gradient table, from the first source given (io/gradients.h) when `data` (read from
 * data_path) is given, from FSL's files alone without it; the scheme's columns and the
 * --measure files. */
static int read_protocol(const dm_model_info *mi, const dm_grad_files *grads, const dm_volume *data,
                         const char *data_path, const char *measure_spec, const char *scheme,
                         int nvol, dm_fit_files *f)
{
    const char *bvals = grads->bvals, *bvecs = grads->bvecs;
    if (dm_fit_for_each_item(measure_spec, "--measure", known_measure, (void *)mi) != 0)
        return -1;
    int need_bv = 0;
    for (int i = 0; i < mi->nmeasures; i++)
        if (mi->measures[i].source == DM_SRC_BVALS || mi->measures[i].source == DM_SRC_BVECS)
            need_bv = 1;
    f->in.measure_option = "--measure";
    if (read_scheme_measures(mi, scheme, nvol, &f->in.measures) != 0) return -1;
    if (need_bv) {
        if (!data && (!bvals || !bvecs))
            return dm_set_error("model '%s' reads b-values and gradient directions: give --bvals "
                                "and --bvecs",
                                mi->name);
        int n;
        const char *table = NULL;
        if (data ? dm_read_gradients(grads, data, data_path, &f->b, &f->g, &table)
                 : dm_read_bvals_bvecs(bvals, bvecs, nvol, &f->b, &f->g, &n))
            return -1;
        f->in.b = f->b;
        f->in.g = f->g;
        f->in.b_name = bvals ? bvals : table; /* for messages: where the table came from */
        f->in.g_name = bvecs ? bvecs : table;
    }
    for (int i = 0; i < mi->nmeasures; i++) {
        const dm_measure_info *x = &mi->measures[i];
        if (x->source != DM_SRC_FILE) continue;
        struct lookup_ctx lc = {.name = x->name};
        if (dm_fit_for_each_item(measure_spec, "--measure", lookup_item, &lc) != 0) return -1;
        if (!lc.found)
            return dm_set_error("model '%s' needs per-measurement input '%s': give --measure "
                                "%s=FILE",
                                mi->name, x->name, x->name);
        double *rows = NULL;
        if (read_measure_file(lc.value, x->name, x->width, nvol, &rows) != 0 ||
            add_rows(&f->in.measures, x->name, lc.value, rows, nvol, x->width) != 0)
            return -1;
    }
    return 0;
}

int dm_fit_read_protocol(const dm_model_info *mi, const char *bvals, const char *bvecs,
                         const char *measure_spec, const char *scheme, int nvol, dm_fit_files *f)
{
    memset(f, 0, sizeof *f);
    const dm_grad_files grads = {bvals, bvecs, NULL};
    if (read_protocol(mi, &grads, NULL, NULL, measure_spec, scheme, nvol, f) == 0) return 0;
    dm_fit_files_free(f);
    return -1;
}

int dm_build_measurements(const dm_model_info *mi, const char *bvals, const char *bvecs,
                          const char *measure_spec, const char *scheme, int nvol, double **meas_out,
                          double **bvals_out)
{
    dm_fit_files f;
    if (dm_fit_read_protocol(mi, bvals, bvecs, measure_spec, scheme, nvol, &f) != 0) return -1;
    double *b = NULL;
    int rc = dm_fit_measurements(mi, &f.in, nvol, meas_out, &b);
    if (bvals_out)
        *bvals_out = b;
    else
        free(b);
    dm_fit_files_free(&f);
    return rc;
}

/* The reading of --voxel's and --init's items: the model, the grid their maps must have. */
struct item_ctx {
    const dm_model_info *mi;
    const dm_volume *grid;
    dm_fit_items *items;
};

/* --voxel NAME=MAP|VALUE: a value where it is a number and the input has one value per voxel,
 * else a map. */
static int read_voxel(void *ctx, const char *name, const char *value)
{
    struct item_ctx *c = ctx;
    const dm_model_info *mi = c->mi;
    for (int i = 0; i < mi->nvoxels; i++) {
        if (strcmp(mi->voxels[i].name, name)) continue;
        char *end;
        double x = strtod(value, &end);
        if (*value && !*end && mi->voxels[i].width == 1)
            return add_value(c->items, name, value, x);
        return add_map(c->items, name, value, mi->voxels[i].width, c->grid);
    }
    return dm_set_error("--voxel: model '%s' has no per-voxel input '%s'", mi->name, name);
}

int dm_fit_read(const dm_fit_request *r, dm_model_info *mi, dm_volume *data, dm_fit_files *f)
{
    memset(f, 0, sizeof *f);
    memset(data, 0, sizeof *data);
    memset(mi, 0, sizeof *mi);
    if (dm_model_load(r->model, mi) != 0) return -1;
    if (!r->data) return dm_set_error("--data is required");
    if (!r->out) return dm_set_error("--out is required");
    if (dm_volume_read(r->data, data) != 0) return -1;
    if (data->nt == 1)
        return dm_set_error("%s: a 3D image (%dx%dx%d): --data needs one volume per measurement, "
                            "a 4D image",
                            r->data, data->nx, data->ny, data->nz);
    f->in.data = dm_array_of_volume(data);
    f->in.data_name = r->data;
    const dm_grad_files grads = {r->bvals, r->bvecs, r->grad};
    if (read_protocol(mi, &grads, data, r->data, r->measure, r->scheme, data->nt, f) != 0)
        return -1;
    if (r->mask) {
        if (dm_volume_read(r->mask, &f->mask) != 0) return -1;
        if (f->mask.nt > 1)
            return dm_set_error("%s: a 4D image (%dx%dx%dx%d); a mask is 3D", r->mask, f->mask.nx,
                                f->mask.ny, f->mask.nz, f->mask.nt);
        if (dm_volume_check_same_space(&f->mask, r->mask, data, r->data) != 0) return -1;
        f->in.mask = dm_array_of_volume(&f->mask);
        f->in.mask_name = r->mask;
    }
    f->in.voxel_option = "--voxel";
    struct item_ctx vc = {mi, data, &f->in.voxel};
    return dm_fit_for_each_item(r->voxel, "--voxel", read_voxel, &vc);
}

/* --init NAME=VALUE|MAP: a value where it is a number, else a map. */
static int read_start(void *ctx, const char *name, const char *value)
{
    struct item_ctx *c = ctx;
    if (dm_model_param_index(c->mi, name) < 0)
        return dm_set_error("--init: model '%s' has no parameter '%s'", c->mi->name, name);
    char *end;
    double x = strtod(value, &end);
    if (*value && !*end) return add_value(c->items, name, value, x);
    return add_map(c->items, name, value, 1, c->grid);
}

int dm_fit_read_starts(const dm_fit_request *r, const dm_model_info *mi, const dm_volume *grid,
                       dm_fit_items *starts)
{
    memset(starts, 0, sizeof *starts);
    int rc = 0;
    if (r->init_from) { /* every parameter's map that is there */
        for (int k = 0; k < mi->nparams && rc == 0; k++) {
            char *path = dm_volume_find(r->init_from, mi->params[k].name);
            if (access(path, R_OK) == 0) {
                rc = add_map(starts, mi->params[k].name, path, 1, grid);
                if (rc == 0) starts->from_dir |= 1u << (starts->n - 1);
            }
            free(path);
        }
        if (rc == 0 && starts->n == 0)
            rc = dm_set_error("--init-from %s: no map named after a parameter of '%s' there",
                              r->init_from, mi->name);
    }
    struct item_ctx sc = {mi, grid, starts};
    if (rc == 0) rc = dm_fit_for_each_item(r->init, "--init", read_start, &sc);
    if (rc != 0) dm_fit_items_free(starts);
    return rc;
}

int dm_problem_load(const dm_fit_request *r, dm_problem *p)
{
    dm_model_info mi;
    dm_volume data;
    dm_fit_files f;
    memset(p, 0, sizeof *p);
    int rc = dm_fit_read(r, &mi, &data, &f);
    if (rc == 0) rc = dm_problem_build(r, &mi, &f.in, &data, p); /* takes the data over */
    p->free_data = dm_volume_free;
    dm_model_info_free(&mi);
    dm_volume_free(&data);
    dm_fit_files_free(&f);
    return rc;
}

int dm_problem_stage(const dm_fit_request *r, const double *prev, dm_problem *p)
{
    if (!r->out) return dm_set_error("--out is required");
    dm_fit_request q = *r;
    if (prev) q.init_from = NULL; /* the previous stage's maps come instead */
    dm_fit_items starts;
    if (dm_fit_read_starts(&q, &p->mi, &p->data, &starts) != 0) return -1;
    int rc = dm_problem_stage_items(r, prev, &starts, "--init", p);
    dm_fit_items_free(&starts);
    return rc;
}

int dm_problem_plan(const dm_fit_request *r, dm_problem *p)
{
    if (dm_problem_load(r, p) != 0) return -1;
    return dm_problem_stage(r, NULL, p);
}

/* Writes nt values per fitted voxel as a map on the grid, made as the file is written: value t
 * of fitted voxel i is vals[i * stride + t * volume_stride] (or the same of fvals, when vals is
 * NULL).  keep (nvox): 1 where a voxel has an estimate; the others are 0, as dm_fit_scatter
 * leaves them. */
static int write_map(const char *dir, const char *name, const dm_problem *p,
                     const unsigned char *keep, int nt, const double *vals, const float *fvals,
                     size_t stride, size_t volume_stride, int type)
{
    char file[256];
    snprintf(file, sizeof file, "%s.nii.gz", name);
    char *path = dm_volume_output_path(dir, file);
    /* the predicted signal of a .mif's measurements carries their gradient table */
    const double *dw =
        !strcmp(name, "predicted") && p->data.dw_rows == nt ? p->data.dw_scheme : NULL;
    dm_masked_values m = {.nvox = p->nvox, .vox = p->index, .n = p->nfit, .vals = vals,
                          .fvals = fvals, .stride = stride, .volume_stride = volume_stride,
                          .keep = keep};
    int rc = !path ? dm_set_error("%s: out of memory for output '%s'", dir, name)
                   : dm_volume_write_made(path, &p->data, nt, dm_masked_values_get, &m, type, dw);
    free(path);
    return rc;
}

/* The small maps of a fit (a value or a vector per voxel), queued and then written at once,
 * one per thread: a 200,000-voxel map is one compressed block, so one map at a time left all
 * but one core idle.  vals holds nt values per fitted voxel; the status map (full_grid) one
 * value per voxel of the grid. */
typedef struct map_job {
    char name[128];
    int nt, full_grid;
    double *vals;
    int rc;
    char error[512];
} map_job;

typedef struct map_queue {
    map_job *job;
    int n, cap;
} map_queue;

/* Queues a job of name's values (taken over). */
static int queue_map(map_queue *q, const char *name, int nt, double *vals)
{
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 32;
        map_job *j = realloc(q->job, (size_t)cap * sizeof *j);
        if (!j) {
            free(vals);
            return dm_set_error("out of memory for output '%s'", name);
        }
        q->job = j, q->cap = cap;
    }
    map_job *j = &q->job[q->n++];
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name);
    j->nt = nt;
    j->vals = vals;
    return 0;
}

static void write_job(const char *dir, const dm_problem *p, const unsigned char *keep,
                      map_job *j, int type)
{
    if (j->full_grid) {
        char *path = dm_volume_output_path(dir, "status.nii.gz");
        j->rc = path ? dm_volume_write(path, &p->data, 1, j->vals, DM_OUT_UINT8) : -1;
        free(path);
    } else {
        j->rc = write_map(dir, j->name, p, keep, j->nt, j->vals, NULL, (size_t)j->nt, 1, type);
    }
    if (j->rc != 0) snprintf(j->error, sizeof j->error, "%s", dm_last_error());
}

/* Writes every queued map (none when write is 0: an error came first): the vector maps one
 * after another, each compressed on all cores (a 200,000-voxel vector map is several blocks,
 * which one thread would compress in turn while the others wait at the end), then the scalar
 * maps concurrently, one per thread; the first error in queue order.  Frees the queue. */
static int write_queue(const char *dir, const dm_problem *p, const unsigned char *keep,
                       map_queue *q, int type, int write)
{
    int *order = malloc((size_t)(q->n ? q->n : 1) * sizeof *order), m = 0;
    for (int i = 0; write && order && i < q->n; i++)
        if (q->job[i].nt > 1)
            write_job(dir, p, keep, &q->job[i], type);
        else
            order[m++] = i;
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < m; k++) write_job(dir, p, keep, &q->job[order[k]], type);
    int rc = order || !write ? 0 : dm_set_error("%s: out of memory for the outputs", dir);
    free(order);
    for (int i = 0; i < q->n; i++) {
        if (rc == 0 && q->job[i].rc != 0) rc = dm_set_error("%s", q->job[i].error);
        free(q->job[i].vals);
    }
    free(q->job);
    memset(q, 0, sizeof *q);
    return rc;
}

/* The sample files are written on threads of their own while the other maps are made, several
 * files at once, each compressed by its share of the cores: a file's members reach the page
 * cache one at a time (in order, by one thread), so that one file at a time left the kernel's
 * copying on one core.  Writer w takes parameters w, w + writers, ...  On an H200's 16-core
 * host, 1, 2, 3 and 4 writers wrote ball & 3 sticks' 12 files (431,568 voxels, 50 samples)
 * with the other maps in 1.81, 1.60, 1.54 and 1.69-1.77 s, reading the fit's array in place;
 * from a copy laid out as the files are, 1.21-1.37 s against 1.51-1.68 s. */
enum { SAMPLE_WRITERS = 4 };

typedef struct samples_writer {
    pthread_t thread;
    const char *dir;
    const dm_problem *p;
    const unsigned char *keep;
    /* sample t of fitted voxel i: of parameter k in the fit's array at
     * vals[k + i * stride + t * volume_stride]; or, where copy is not NULL, of listed parameter
     * j in the copy at [(j * ns + t) * nfit + i], floats (doubles for float64 maps) */
    const double *vals;
    size_t stride, volume_stride;
    const void *copy;
    const int *params; /* the parameters whose samples are written */
    int nparams, ns, first, step, threads, type, started, rc;
    char error[512];
} samples_writer;

static void *samples_main(void *arg)
{
    samples_writer *w = arg;
    const size_t nfit = w->p->nfit;
    omp_set_num_threads(w->threads);
    for (int j = w->first; w->rc == 0 && j < w->nparams; j += w->step) {
        int k = w->params[j];
        char name[160];
        snprintf(name, sizeof name, "%s_samples", w->p->mi.params[k].name);
        const size_t at = (size_t)j * w->ns * nfit;
        if (!w->copy)
            w->rc = write_map(w->dir, name, w->p, w->keep, w->ns, w->vals + k, NULL, w->stride,
                              w->volume_stride, w->type);
        else if (w->type == DM_OUT_FLOAT64)
            w->rc = write_map(w->dir, name, w->p, w->keep, w->ns, (const double *)w->copy + at,
                              NULL, 1, nfit, w->type);
        else
            w->rc = write_map(w->dir, name, w->p, w->keep, w->ns, NULL,
                              (const float *)w->copy + at, 1, nfit, w->type);
        if (w->rc != 0) snprintf(w->error, sizeof w->error, "%s", dm_last_error());
    }
    return NULL;
}

/* The command's sink: the predicted signal written at once on all cores, the samples on their
 * writers, the other maps queued for write_queue. */
typedef struct file_sink {
    dm_fit_sink base;
    const char *dir;
    const dm_problem *p;
    const unsigned char *keep; /* nvox: 1 where a voxel has an estimate */
    int type;
    map_queue q;
    samples_writer writer[SAMPLE_WRITERS];
    int writers;
    int params[64], nparams; /* the parameters whose samples are written */
    void *by_sample; /* the samples by parameter and sample, each volume's values together */
} file_sink;

static int file_put(dm_fit_sink *s, const char *name, int kind, int nt, double *vals)
{
    file_sink *f = (file_sink *)s;
    if (kind == DM_MAP_PREDICTED) {
        int rc = write_map(f->dir, name, f->p, f->keep, nt, vals, NULL, (size_t)nt, 1, f->type);
        free(vals);
        return rc;
    }
    if (queue_map(&f->q, name, nt, vals) != 0) return -1;
    f->q.job[f->q.n - 1].full_grid = kind == DM_MAP_STATUS;
    return 0;
}

/* The fit's samples (voxel by voxel) of the listed parameters laid out as the files hold them:
 * sample t of listed parameter j in fitted voxel i at out[(j * ns + t) * n + i], made in blocks
 * of voxels whose samples stay in cache.  Read so, each file's blocks are made from consecutive
 * values instead of one cache line a value.  out holds floats, or doubles when `dbl` (float64
 * maps): a float32 map's values once rounded to float are those the file holds. */
static void samples_by_volume(const double *samples, size_t n, int P, int ns, const int *params,
                              int nparams, int dbl, void *out)
{
    enum { VOXELS = 64 };
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < n; b += VOXELS) {
        size_t e = b + VOXELS < n ? b + VOXELS : n;
        for (int j = 0; j < nparams; j++)
            for (int t = 0; t < ns; t++) {
                const size_t to = ((size_t)j * ns + t) * n;
                const double *from = samples + (size_t)t * P + params[j];
                if (dbl)
                    for (size_t i = b; i < e; i++)
                        ((double *)out)[to + i] = from[i * ns * P];
                else
                    for (size_t i = b; i < e; i++)
                        ((float *)out)[to + i] = (float)from[i * ns * P];
            }
    }
}

static int file_samples(dm_fit_sink *s, const double *samples, int P, int ns)
{
    file_sink *f = (file_sink *)s;
    const size_t nfit = f->p->nfit;
    f->nparams = 0;
    for (int k = 0; k < P && k < 64; k++)
        if (f->p->samples_mask >> k & 1) f->params[f->nparams++] = k;
    if (f->nparams == 0) return 0;
    const int cores = omp_get_max_threads();
    int n = (cores + 5) / 6; /* a writer for every 6 cores (on 16: 3 writers of 5 threads) */
    n = n < f->nparams ? n : f->nparams;
    n = n < SAMPLE_WRITERS ? n : SAMPLE_WRITERS;
    /* the fit's own array read in place where there is no room for a copy (on huge pages: its
     * first touch faults them in) */
    const int dbl = f->type == DM_OUT_FLOAT64;
    f->by_sample =
        dm_big_alloc((size_t)f->nparams * ns * nfit * (dbl ? sizeof(double) : sizeof(float)));
    if (f->by_sample)
        samples_by_volume(samples, nfit, P, ns, f->params, f->nparams, dbl, f->by_sample);
    f->writers = n;
    for (int w = 0; w < n; w++) {
        samples_writer *x = &f->writer[w];
        *x = (samples_writer){.dir = f->dir, .p = f->p, .keep = f->keep, .vals = samples,
                              .stride = (size_t)ns * P, .volume_stride = (size_t)P,
                              .copy = f->by_sample, .params = f->params,
                              .nparams = f->nparams, .ns = ns, .first = w, .step = n,
                              .type = f->type};
        x->threads = cores / n > 1 ? cores / n : 1;
        x->started = pthread_create(&x->thread, NULL, samples_main, x) == 0;
        if (!x->started) samples_main(x); /* no thread: written here */
    }
    return 0;
}

/* Waits for the sample writers; the first error among them (made the thread's last error when
 * `report`). */
static int samples_join(file_sink *f, int report)
{
    int rc = 0;
    for (int w = 0; w < f->writers; w++) {
        samples_writer *x = &f->writer[w];
        if (x->started) pthread_join(x->thread, NULL);
        if (rc == 0 && x->rc != 0) rc = report ? dm_set_error("%s", x->error) : -1;
    }
    f->writers = 0;
    free(f->by_sample);
    f->by_sample = NULL;
    return rc;
}

int dm_fit_write_outputs(const dm_fit_request *r, const char *dir, dm_problem *p,
                         const dm_cpu_fitter *f, dm_fit_results *res)
{
    /* which voxels have an estimate, shared by every map */
    unsigned char *keep = malloc(p->nvox);
    if (!keep) return dm_set_error("%s: out of memory for the outputs", dir);
#pragma omp parallel for schedule(static)
    for (size_t g = 0; g < p->nvox; g++) keep[g] = DM_STATUS_HAS_ESTIMATE(p->status[g]);
    file_sink s = {.base = {file_put, file_samples}, .dir = dir, .p = p, .keep = keep,
                   .type = r->out_float64 ? DM_OUT_FLOAT64 : DM_OUT_FLOAT32};
    int rc = dm_fit_make_outputs(r, p, f, res, &s.base);
    int wrc = write_queue(dir, p, keep, &s.q, s.type, rc == 0); /* frees the queue in any case */
    if (rc == 0) rc = wrc;
    int src = samples_join(&s, rc == 0); /* the samples written beside the maps above */
    free(keep);
    return rc != 0 ? rc : src;
}


static const dm_fit_io file_io = {dm_problem_load, dm_problem_stage, dm_fit_write_outputs};

int dm_fit_run_cascade(const dm_fit_request *stages, int n)
{
    return dm_fit_run_engine(stages, n, &file_io, NULL);
}

int dm_fit_run(const dm_fit_request *r)
{
    return dm_fit_run_cascade(r, 1);
}
