/* Connectomes as tck2connectome makes them by default (connectome.h). */
#include "fodtrack/connectome.h"
#include "util/error.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dense matrices of this many nodes take 2 x 8 x N^2 bytes (512 MiB at the limit). */
#define CONNECTOME_MAX_NODES 4096

int dm_parcellation_from(const dm_image_view *v, dm_parcellation *p)
{
    memset(p, 0, sizeof *p);
    const char *path = v->name;
    int rc = 0;
    size_t n = v->shape[0] * v->shape[1] * v->shape[2];
    double max = 0;
    if (dm_view_nt(v) != 1)
        rc = dm_set_error("%s: %zu volumes; a parcellation is one 3D image of node labels", path,
                          dm_view_nt(v));
    if (rc == 0 && !(p->label = malloc((n ? n : 1) * sizeof *p->label)))
        rc = dm_set_error("%s: out of memory", path);
    size_t i = 0;
    for (size_t z = 0; rc == 0 && z < v->shape[2]; z++)
        for (size_t y = 0; rc == 0 && y < v->shape[1]; y++)
            for (size_t x = 0; rc == 0 && x < v->shape[0]; x++, i++) {
                double value = dm_view_at(v, x, y, z, 0);
                if (!(round(value) == value))
                    rc = dm_set_error("%s: value %g at voxel %zu is not a whole number; a "
                                      "parcellation holds integer node labels",
                                      path, value, i);
                else if (value < 0)
                    rc = dm_set_error("%s: negative value %g at voxel %zu; node labels are 0 "
                                      "(none) or positive",
                                      path, value, i);
                if (rc == 0 && value > max) max = value;
                p->label[i] = value <= CONNECTOME_MAX_NODES ? (unsigned int)value : 0;
            }
    if (rc == 0 && max > CONNECTOME_MAX_NODES)
        rc = dm_set_error("%s: largest label %.0f; at most %d nodes are supported", path, max,
                          CONNECTOME_MAX_NODES);
    if (rc == 0) {
        p->nx = (int)v->shape[0];
        p->ny = (int)v->shape[1];
        p->nz = (int)v->shape[2];
        p->max_label = (unsigned int)max;
        p->vox2world = v->v2w;
        memcpy(p->spacing, v->voxel, sizeof p->spacing);
        if (dm_affine_invert(&p->vox2world, &p->world2vox) != 0)
            rc = dm_set_error("%s: the voxel-to-world matrix cannot be inverted", path);
    }
    if (rc != 0) dm_parcellation_free(p);
    return rc;
}

void dm_parcellation_free(dm_parcellation *p)
{
    if (!p) return;
    free(p->label);
    memset(p, 0, sizeof *p);
}

typedef struct search_entry {
    double dist;
    long scan; /* position in the z, y, x scan: ties keep it */
    int offset[3];
} search_entry;

static int by_distance(const void *pa, const void *pb)
{
    const search_entry *a = pa, *b = pb;
    if (a->dist != b->dist) return a->dist < b->dist ? -1 : 1;
    return a->scan < b->scan ? -1 : a->scan > b->scan;
}

static double sq(double x)
{
    return x * x;
}

int dm_node_search_init(dm_node_search *s, const dm_parcellation *p, double radius_mm)
{
    memset(s, 0, sizeof *s);
    const double *sp = p->spacing;
    /* The sums in tck2connectome's order (z, y, x), so that distances tie where its do. */
    s->radius = radius_mm;
    s->slack = sqrt(sq(0.5 * sp[2]) + sq(0.5 * sp[1]) + sq(0.5 * sp[0]));
    double reach = radius_mm + s->slack;
    double smallest = fmin(sp[0], fmin(sp[1], sp[2]));
    int m = (int)ceil(reach / smallest);
    if (m > 200) return dm_set_error("radius %g mm: too many voxels to search", radius_mm);
    size_t side = 2 * (size_t)m + 1;
    search_entry *e = malloc(side * side * side * sizeof *e);
    if (!e) return dm_set_error("out of memory for the node search");
    long scan = 0;
    int n = 0;
    for (int z = -m; z <= m; z++)
        for (int y = -m; y <= m; y++)
            for (int x = -m; x <= m; x++, scan++) {
                double dist = sqrt(sq(z * sp[2]) + sq(y * sp[1]) + sq(x * sp[0]));
                if (!(dist < reach)) continue;
                e[n] = (search_entry){dist, scan, {x, y, z}};
                n++;
            }
    qsort(e, (size_t)n, sizeof *e, by_distance);
    s->offset = malloc((size_t)(n ? n : 1) * sizeof *s->offset);
    if (!s->offset) {
        free(e);
        return dm_set_error("out of memory for the node search");
    }
    for (int i = 0; i < n; i++) memcpy(s->offset[i], e[i].offset, sizeof s->offset[i]);
    s->n = n;
    free(e);
    return 0;
}

void dm_node_search_free(dm_node_search *s)
{
    if (!s) return;
    free(s->offset);
    memset(s, 0, sizeof *s);
}

unsigned int dm_node_of_endpoint(const dm_parcellation *p, const dm_node_search *s,
                                 const float xyz[3])
{
    double pt[3] = {xyz[0], xyz[1], xyz[2]}, v[3];
    dm_affine_apply(&p->world2vox, pt, v);
    long centre[3];
    for (int k = 0; k < 3; k++) {
        if (!(fabs(v[k]) < 1e9)) return 0;
        centre[k] = lround(v[k]); /* half away from zero, as std::round */
    }
    double best = s->radius;
    unsigned int node = 0;
    for (int i = 0; i < s->n; i++) {
        double vox[3], at[3];
        long c[3];
        for (int k = 0; k < 3; k++) {
            c[k] = centre[k] + s->offset[i][k];
            vox[k] = (double)c[k];
        }
        dm_affine_apply(&p->vox2world, vox, at);
        double dist = sqrt(sq(pt[0] - at[0]) + sq(pt[1] - at[1]) + sq(pt[2] - at[2]));
        /* The offsets come nearest first to within a voxel's diagonal of the true order. */
        if (dist > best + 2 * s->slack) return node;
        if (dist < best && c[0] >= 0 && c[0] < p->nx && c[1] >= 0 && c[1] < p->ny && c[2] >= 0 &&
            c[2] < p->nz) {
            unsigned int label = p->label[c[0] + (long)p->nx * (c[1] + (long)p->ny * c[2])];
            if (label) {
                node = label;
                best = dist;
            }
        }
    }
    return node;
}

static double streamline_length(const float *xyz, long n)
{
    double len = 0;
    for (long i = 1; i < n; i++) {
        const float *a = xyz + 3 * (i - 1), *b = xyz + 3 * i;
        len += sqrt(sq((double)b[0] - a[0]) + sq((double)b[1] - a[1]) + sq((double)b[2] - a[2]));
    }
    return len;
}

int dm_connectome_build(const dm_parcellation *p, const dm_tck *t, const float *weight,
                        double radius_mm, int threads, dm_watch *watch, dm_connectome *c)
{
    memset(c, 0, sizeof *c);
    dm_node_search search;
    if (dm_node_search_init(&search, p, radius_mm) != 0) return -1;
    size_t n_nodes = p->max_label, ns = (size_t)t->count;
    unsigned int *ends = malloc(2 * (ns ? ns : 1) * sizeof *ends);
    double *length = malloc((ns ? ns : 1) * sizeof *length);
    c->nodes = (int)n_nodes;
    c->count = calloc(n_nodes * n_nodes + 1, sizeof *c->count);
    c->length_sum = calloc(n_nodes * n_nodes + 1, sizeof *c->length_sum);
    if (!weight) c->length_fixed = calloc(n_nodes * n_nodes + 1, sizeof *c->length_fixed);
    int rc = ends && length && c->count && c->length_sum && (weight || c->length_fixed)
                 ? 0
                 : dm_set_error("out of memory");
    int stopped = 0;
    long n_run = rc == 0 ? (long)ns : 0;
    /* Each streamline's nodes and length in parallel; the sums after, in file order. */
#pragma omp parallel for schedule(dynamic, 1024)                                                   \
    num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (long s = 0; s < n_run; s++) {
        int halt;
#pragma omp atomic read
        halt = stopped;
        if (halt) continue;
        /* the caller's cancel is polled by the calling thread (OpenMP's thread 0) */
        if (((s & 4095) == 0 || omp_get_thread_num() == 0) && dm_watch_stopping(watch)) {
#pragma omp atomic write
            stopped = 1;
        }
        const float *xyz = t->xyz + 3 * t->start[s];
        long n = t->npoints[s];
        ends[2 * s] = n > 0 ? dm_node_of_endpoint(p, &search, xyz) : 0;
        ends[2 * s + 1] = n > 0 ? dm_node_of_endpoint(p, &search, xyz + 3 * (n - 1)) : 0;
        length[s] = streamline_length(xyz, n);
    }
    if (rc == 0 && stopped) rc = dm_watch_stop_error(watch);
    for (size_t s = 0; rc == 0 && s < ns; s++) {
        unsigned int a = ends[2 * s], b = ends[2 * s + 1];
        if (!a || !b) {
            c->unassigned++;
            continue;
        }
        size_t ab = (a - 1) * n_nodes + (b - 1), ba = (b - 1) * n_nodes + (a - 1);
        double w = weight ? weight[s] : 1;
        c->count[ab] += w;
        if (ab != ba) c->count[ba] += w;
        if (weight) {
            c->length_sum[ab] += w * length[s];
            if (ab != ba) c->length_sum[ba] += w * length[s];
        } else {
            unsigned __int128 fx = dm_length_fixed(length[s]);
            c->length_fixed[ab] += fx;
            if (ab != ba) c->length_fixed[ba] += fx;
        }
        c->assigned++;
    }
    if (rc == 0 && !weight) dm_connectome_finish(c);
    free(ends);
    free(length);
    dm_node_search_free(&search);
    if (rc != 0) dm_connectome_free(c);
    return rc;
}

void dm_connectome_finish(dm_connectome *c)
{
    size_t n = (size_t)c->nodes * c->nodes;
    for (size_t e = 0; c->length_fixed && e < n; e++)
        c->length_sum[e] = (double)c->length_fixed[e] * 0x1p-64;
}

/* A whole number of up to 39 digits in decimal, into buf (40 bytes at least). */
static const char *u128_text(unsigned __int128 v, char *buf)
{
    char *p = buf + 40;
    *--p = 0;
    do {
        *--p = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    return p;
}

int dm_connectome_write_sums(const dm_connectome *c, const char *path)
{
    if (!c->length_fixed) return dm_set_error("%s: no exact sums (a weighted connectome)", path);
    FILE *f = fopen(path, "w");
    if (!f) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    size_t n = (size_t)c->nodes * c->nodes;
    fprintf(f, "nodes %d\n", c->nodes);
    char buf[48];
    for (size_t e = 0; e < n; e++)
        fprintf(f, "%llu %s\n", (unsigned long long)c->count[e],
                u128_text(c->length_fixed[e], buf));
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    return 0;
}

void dm_connectome_free(dm_connectome *c)
{
    if (!c) return;
    free(c->count);
    free(c->length_sum);
    free(c->length_fixed);
    memset(c, 0, sizeof *c);
}

int dm_connectome_write_csv(const dm_connectome *c, const double *values, int mean,
                            const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    int n = c->nodes;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            size_t k = (size_t)i * n + j;
            double x = 0;
            if (j >= i) x = !mean ? values[k] : c->count[k] > 0 ? values[k] / c->count[k] : 0;
            fprintf(f, "%.15g%c", x, j + 1 < n ? ',' : '\n');
        }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    return 0;
}

int dm_connectome_make(const dm_parcellation *p, const char *parc_name, const dm_tck *t,
                       const float *weight, int threads, dm_watch *watch, dm_connectome *c)
{
    memset(c, 0, sizeof *c);
    if (p->max_label == 0) return dm_set_error("%s: no node labels (every voxel is 0)", parc_name);
    dm_watch_report(watch, "connectome", 0);
    if (dm_connectome_build(p, t, weight, 4.0, threads, watch, c) != 0) return -1;
    dm_watch_report(watch, "connectome", 1);
    return 0;
}

void dm_connectome_provenance(const dm_connectome *c, dm_provenance *prov)
{
    dm_provenance_num(prov, DM_PROV_RESULT, "nodes", c->nodes);
    dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_assigned", (double)c->assigned);
    dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_unassigned", (double)c->unassigned);
}
