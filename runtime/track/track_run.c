#include "track/track_run.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What one thread owns: streamline buffers, de-duplication stamps, its share of the outputs. */
typedef struct worker {
    dm_track_half half[2];
    dm_track_loop loop;
    unsigned int stamp;
    unsigned int *vox_seen, *t2_seen, *t3_seen, *target_seen;
    int *nodes; /* distinct matrix 3 nodes of the current streamline */
    unsigned int *paths;
    dm_sparse m1, m2, m3;
    unsigned long long waytotal, steps, ends[6];
    /* saved streamlines, in increasing id order */
    long nsaved, cap_saved;
    unsigned long long *saved_id;
    long *saved_len;
    float *saved_xyz;
    size_t nxyz, cap_xyz;
    int failed;
} worker;

static int worker_init(worker *w, const dm_track_ctx *c, const dm_track_masks *m,
                       const dm_track_options *o)
{
    memset(w, 0, sizeof *w);
    int npts = c->half_steps + 1;
    for (int k = 0; k < 2; k++) {
        w->half[k].pts = malloc(3 * (size_t)npts * sizeof(float));
        w->half[k].svox = malloc((size_t)npts * sizeof(int));
    }
    int cap = 64;
    while (cap < 2 * npts) cap *= 2;
    w->loop.cap = cap;
    w->loop.keys = malloc(cap * sizeof(int));
    w->loop.dirs = malloc(3 * (size_t)cap * sizeof(float));
    w->loop.used = malloc(cap * sizeof(int));
    if (w->loop.keys)
        for (int i = 0; i < cap; i++) w->loop.keys[i] = -1;
    w->vox_seen = calloc(m->nvox, sizeof(unsigned int));
    if (m->n2) w->t2_seen = calloc(m->n2, sizeof(unsigned int));
    if (m->n3) {
        w->t3_seen = calloc(m->n3, sizeof(unsigned int));
        w->nodes = malloc(2 * (size_t)npts * sizeof(int));
    }
    if (m->ntargets) w->target_seen = calloc(m->ntargets, sizeof(unsigned int));
    if (o->opd) w->paths = calloc(m->nvox, sizeof(unsigned int));
    dm_sparse_init(&w->m1);
    dm_sparse_init(&w->m2);
    dm_sparse_init(&w->m3);
    int ok = w->half[0].pts && w->half[1].pts && w->half[0].svox && w->half[1].svox &&
             w->loop.keys && w->loop.dirs && w->loop.used && w->vox_seen &&
             (!m->n2 || w->t2_seen) && (!m->n3 || (w->t3_seen && w->nodes)) &&
             (!m->ntargets || w->target_seen) && (!o->opd || w->paths);
    return ok ? 0 : -1;
}

static void worker_free(worker *w)
{
    for (int k = 0; k < 2; k++) {
        free(w->half[k].pts);
        free(w->half[k].svox);
    }
    free(w->loop.keys);
    free(w->loop.dirs);
    free(w->loop.used);
    free(w->vox_seen);
    free(w->t2_seen);
    free(w->t3_seen);
    free(w->target_seen);
    free(w->nodes);
    free(w->paths);
    dm_sparse_free(&w->m1);
    dm_sparse_free(&w->m2);
    dm_sparse_free(&w->m3);
    free(w->saved_id);
    free(w->saved_len);
    free(w->saved_xyz);
}

/* A new stamp for "seen in this streamline" marks; all marks are cleared when it wraps. */
static void next_stamp(worker *w, const dm_track_masks *m)
{
    if (++w->stamp != 0) return;
    memset(w->vox_seen, 0, m->nvox * sizeof(unsigned int));
    if (w->t2_seen) memset(w->t2_seen, 0, m->n2 * sizeof(unsigned int));
    if (w->t3_seen) memset(w->t3_seen, 0, m->n3 * sizeof(unsigned int));
    if (w->target_seen) memset(w->target_seen, 0, m->ntargets * sizeof(unsigned int));
    w->stamp = 1;
}

/* Adds a kept streamline of seed k to this thread's outputs: every seed-space voxel its kept
 * halves (bit h of halves) visit counts once, whichever half visits it and however often. */
static void accumulate(worker *w, const dm_track_masks *m, const dm_track_seeds *s, long k,
                       int halves, unsigned int *seeds_to_targets, unsigned int *network)
{
    next_stamp(w, m);
    int own = s->svox[k], nnodes = 0;
    unsigned int reached = 0; /* --network: waypoint bits of the seed masks visited */
    for (int h = 0; h < 2; h++)
        for (int i = 0; (halves >> h & 1) && i < w->half[h].npts; i++) {
            int v = w->half[h].svox[i];
            if (v < 0 || w->vox_seen[v] == w->stamp) continue;
            w->vox_seen[v] = w->stamp;
            if (w->paths) w->paths[v]++;
            if (network) reached |= m->waybits[v];
            if (m->seed_col && m->seed_col[v] >= 0 && v != own)
                dm_sparse_add(&w->m1, (unsigned int)k, (unsigned int)m->seed_col[v]);
            if (m->t2_col && m->t2_col[v] >= 0 && w->t2_seen[m->t2_col[v]] != w->stamp) {
                w->t2_seen[m->t2_col[v]] = w->stamp;
                dm_sparse_add(&w->m2, (unsigned int)k, (unsigned int)m->t2_col[v]);
            }
            if (m->t3_node && m->t3_node[v] >= 0 && w->t3_seen[m->t3_node[v]] != w->stamp) {
                w->t3_seen[m->t3_node[v]] = w->stamp;
                w->nodes[nnodes++] = m->t3_node[v];
            }
            if (seeds_to_targets && own >= 0)
                for (int t = m->target_off[v]; t < m->target_off[v + 1]; t++) {
                    int id = m->target_ids[t];
                    if (w->target_seen[id] == w->stamp) continue;
                    w->target_seen[id] = w->stamp;
#pragma omp atomic
                    seeds_to_targets[(size_t)id * m->nvox + own]++;
                }
        }
    if (network) {
        int g = s->group[k], ng = s->ngroups;
        reached &= m->waymask & ~(1u << g);
        for (int j = 0; j < ng; j++)
            if (reached >> j & 1u) {
#pragma omp atomic
                network[g * ng + j]++;
            }
#pragma omp atomic
        network[ng * ng + g]++;
    }
    unsigned int crossed =
        (halves & 1 ? w->half[0].surfaces : 0u) | (halves & 2 ? w->half[1].surfaces : 0u);
    if (seeds_to_targets && own >= 0) /* target surfaces the streamline crossed */
        for (int b = DM_TRACK_SURF_FIRST; b < DM_TRACK_MAX_SURFACES && crossed >> b; b++) {
            int id = m->surf_target[b];
            if (!(crossed >> b & 1u) || id < 0 || w->target_seen[id] == w->stamp) continue;
            w->target_seen[id] = w->stamp;
#pragma omp atomic
            seeds_to_targets[(size_t)id * m->nvox + own]++;
        }
    for (int a = 0; a < nnodes; a++)
        for (int b = a + 1; b < nnodes; b++) {
            unsigned int i = (unsigned int)w->nodes[a], j = (unsigned int)w->nodes[b];
            dm_sparse_add(&w->m3, i < j ? i : j, i < j ? j : i);
        }
}

/* Keeps the streamline (world mm, half 1 reversed then half 0, only the kept halves: bit i of
 * halves) for the .tck file. */
static void save_streamline(worker *w, unsigned long long id, int halves, float t2w[3][4])
{
    dm_track_half h[2] = {w->half[0], w->half[1]};
    if (!(halves & 1)) h[0].npts = h[0].npts > 0 ? 1 : 0; /* the seed point stays */
    if (!(halves & 2)) h[1].npts = 0;
    long n = h[0].npts + (h[1].npts > 1 ? h[1].npts - 1 : 0);
    if (w->nsaved == w->cap_saved) {
        long cap = w->cap_saved ? 2 * w->cap_saved : 256;
        unsigned long long *ids = realloc(w->saved_id, cap * sizeof *ids);
        long *lens = realloc(w->saved_len, cap * sizeof *lens);
        if (ids) w->saved_id = ids;
        if (lens) w->saved_len = lens;
        if (!ids || !lens) {
            w->failed = 1;
            return;
        }
        w->cap_saved = cap;
    }
    if (w->nxyz + 3 * (size_t)n > w->cap_xyz) {
        size_t cap = w->cap_xyz ? w->cap_xyz : 4096;
        while (cap < w->nxyz + 3 * (size_t)n) cap *= 2;
        float *x = realloc(w->saved_xyz, cap * sizeof *x);
        if (!x) {
            w->failed = 1;
            return;
        }
        w->saved_xyz = x;
        w->cap_xyz = cap;
    }
    float *out = w->saved_xyz + w->nxyz;
    long j = 0;
    for (int i = h[1].npts - 1; i >= 1; i--, j++)
        for (int a = 0; a < 3; a++) {
            const float *p = h[1].pts + 3 * i;
            out[3 * j + a] = t2w[a][0] * p[0] + t2w[a][1] * p[1] + t2w[a][2] * p[2] + t2w[a][3];
        }
    for (int i = 0; i < h[0].npts; i++, j++)
        for (int a = 0; a < 3; a++) {
            const float *p = h[0].pts + 3 * i;
            out[3 * j + a] = t2w[a][0] * p[0] + t2w[a][1] * p[1] + t2w[a][2] * p[2] + t2w[a][3];
        }
    w->saved_id[w->nsaved] = id;
    w->saved_len[w->nsaved++] = n;
    w->nxyz += 3 * (size_t)n;
}

/* The first tck_max saved streamlines over all threads, by id (each thread's list is
 * increasing: OpenMP hands out dynamic chunks in increasing order), and how many streamlines
 * were tracked to find them (all `generated`, unless the cap was reached first). */
static int gather_saved(worker *w, int nw, long tck_max, unsigned long long first_id,
                        unsigned long long generated, dm_track_result *r)
{
    long total = 0;
    size_t total_xyz = 0;
    long *next = calloc(nw, sizeof *next);
    size_t *next_xyz = calloc(nw, sizeof *next_xyz);
    /* first pass: count; second: copy */
    for (int pass = 0; pass < 2; pass++) {
        memset(next, 0, nw * sizeof *next);
        memset(next_xyz, 0, nw * sizeof *next_xyz);
        long n = 0;
        size_t nx = 0;
        while (n < tck_max) {
            int best = -1;
            for (int t = 0; t < nw; t++)
                if (next[t] < w[t].nsaved &&
                    (best < 0 || w[t].saved_id[next[t]] < w[best].saved_id[next[best]]))
                    best = t;
            if (best < 0) break;
            long len = w[best].saved_len[next[best]];
            if (n + 1 == tck_max) r->tck_tracked = w[best].saved_id[next[best]] + 1 - first_id;
            if (pass == 1) {
                r->tck_len[n] = len;
                memcpy(r->tck_xyz + nx, w[best].saved_xyz + next_xyz[best],
                       3 * len * sizeof(float));
            }
            next_xyz[best] += 3 * (size_t)len;
            next[best]++;
            nx += 3 * (size_t)len;
            n++;
        }
        if (pass == 0) {
            total = n;
            total_xyz = nx;
            r->tck_len = malloc((total ? total : 1) * sizeof *r->tck_len);
            r->tck_xyz = malloc((total_xyz ? total_xyz : 1) * sizeof *r->tck_xyz);
            if (!r->tck_len || !r->tck_xyz) {
                free(next);
                free(next_xyz);
                return dm_set_error("track: out of memory for the saved streamlines");
            }
        }
    }
    r->ntck = total;
    if (total < tck_max) r->tck_tracked = generated;
    free(next);
    free(next_xyz);
    return 0;
}

void dm_track_id_range(const dm_track_seeds *s, const dm_track_options *o,
                       unsigned long long *first, unsigned long long *end)
{
    size_t a, b;
    dm_part_range(&o->part, (size_t)s->n * (size_t)o->per_seed, &a, &b);
    *first = a;
    *end = b;
}

void dm_track_ctx_init(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                       const dm_track_options *o, dm_track_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->nx = f->nx;
    c->ny = f->ny;
    c->nz = f->nz;
    c->nsamples = f->nsamples;
    c->nfibres = f->nfibres;
    for (int a = 0; a < 3; a++) c->vox[a] = (float)f->vox[a];
    c->dirs = f->dirs;
    c->fracs = f->fracs;
    c->brain = f->brain;
    c->sx = s->ref.nx;
    c->sy = s->ref.ny;
    c->sz = s->ref.nz;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) c->diff2seed[i][j] = (float)s->track2seed.m[i][j];
    c->flags = m->flags;
    c->waybits = m->waybits;
    c->waymask = m->waymask;
    c->waycond_and = m->waycond_and;
    c->oneway = o->oneway;
    c->network = o->network;
    c->distthresh = (float)o->distthresh;
    c->sampvox = (float)o->sampvox;
    c->surfaces = dm_track_surface_view(&m->surfaces);
    for (int b = 0; b < DM_TRACK_MAX_SURFACES; b++) c->surf_way[b] = m->surf_way[b];
    c->half_steps = (int)(o->nsteps / 2);
    c->step = (float)o->steplength;
    c->cthr = (float)o->cthr;
    c->fibthresh = (float)o->fibthresh;
    c->randfib = o->randfib;
    c->fibst = o->fibst - 1;
    c->modeuler = o->modeuler;
    c->loopcheck = o->loopcheck;
    c->nearest = o->nearest;
    c->rseed = o->rseed;
}

/* tracking mm -> world mm of the diffusion data, for the .tck file */
static void tracking_to_world(const dm_track_field *f, float t2w[3][4])
{
    dm_affine v2w;
    dm_volume_vox2world(&f->mask, &v2w);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) t2w[i][j] = (float)(v2w.m[i][j] / f->vox[j]);
        t2w[i][3] = (float)v2w.m[i][3];
    }
}

int dm_track_trace_saved(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                         const dm_track_options *o, dm_track_result *r)
{
    dm_track_ctx c;
    dm_track_ctx_init(f, s, m, o, &c);
    float t2w[3][4];
    tracking_to_world(f, t2w);
    dm_track_options plain = *o;
    plain.opd = 0; /* the worker needs no count arrays here */
    worker w;
    int rc = worker_init(&w, &c, m, &plain);
    unsigned long long first, end;
    dm_track_id_range(s, o, &first, &end);
    unsigned long long total = end - first;
    for (unsigned long long id = first;
         rc == 0 && id < end && w.nsaved < o->tck_max && !w.failed && !dm_stop_requested(); id++) {
        long k = (long)(id / o->per_seed);
        int halves = dm_track_streamline(&c, s->pos + 3 * k, id, w.half, &w.loop,
                                         c.network ? 1u << s->group[k] : 0u);
        if (halves) save_streamline(&w, id, halves, t2w);
    }
    if (rc != 0 || w.failed) rc = dm_set_error("track: out of memory for the saved streamlines");
    if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
    if (rc == 0) rc = gather_saved(&w, 1, o->tck_max, first, total, r);
    worker_free(&w);
    return rc;
}

int dm_track_run(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                 const dm_track_options *o, dm_track_result *r)
{
    memset(r, 0, sizeof *r);
    dm_track_ctx c;
    dm_track_ctx_init(f, s, m, o, &c);
    float t2w[3][4];
    tracking_to_world(f, t2w);

    if (o->opd) r->paths = calloc(m->nvox, sizeof *r->paths);
    if (o->os2t && m->ntargets)
        r->seeds_to_targets = calloc((size_t)m->ntargets * m->nvox, sizeof *r->seeds_to_targets);
    if (o->network) r->network = calloc((size_t)s->ngroups * (s->ngroups + 1), sizeof *r->network);
    if ((o->opd && !r->paths) || (o->os2t && m->ntargets && !r->seeds_to_targets) ||
        (o->network && !r->network))
        return dm_set_error("track: out of memory for the outputs");
    dm_sparse_init(&r->m1);
    dm_sparse_init(&r->m2);
    dm_sparse_init(&r->m3);

    int nthreads = o->threads > 0 ? o->threads : omp_get_max_threads();
    worker *w = calloc(nthreads, sizeof *w);
    unsigned long long first, end;
    dm_track_id_range(s, o, &first, &end);
    unsigned long long total = end - first;
    dm_progress *prog = dm_progress_start("track", (long)total, "streamlines");
    double t0 = dm_now_seconds();
    int failed = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        worker *me = &w[omp_get_thread_num()];
        if (worker_init(me, &c, m, o) != 0) failed = 1;
        long pending = 0;
#pragma omp for schedule(dynamic, 32)
        for (long long id = (long long)first; id < (long long)end; id++) {
            if (failed || dm_stop_requested()) continue;
            long k = (long)(id / o->per_seed);
            int halves = dm_track_streamline(&c, s->pos + 3 * k, (unsigned long long)id, me->half,
                                             &me->loop, c.network ? 1u << s->group[k] : 0u);
            for (int h = 0; h < 2; h++) {
                me->ends[me->half[h].end]++;
                me->steps += me->half[h].npts;
            }
            if (halves) {
                me->waytotal++;
                accumulate(me, m, s, k, halves, r->seeds_to_targets, r->network);
                if (me->nsaved < o->tck_max)
                    save_streamline(me, (unsigned long long)id, halves, t2w);
            }
            if (++pending == 256) {
                dm_progress_add(prog, pending);
                pending = 0;
            }
        }
        dm_progress_add(prog, pending);
        dm_sparse_compact(&me->m1);
        dm_sparse_compact(&me->m2);
        dm_sparse_compact(&me->m3);
        if (me->failed) failed = 1;
    }
    dm_progress_end(prog);
    r->seconds = dm_now_seconds() - t0;
    r->threads = nthreads;
    r->generated = total;
    int rc = failed ? dm_set_error("track: out of memory while tracking") : 0;
    if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
    for (int t = 0; t < nthreads && rc == 0; t++) {
        r->waytotal += w[t].waytotal;
        r->steps += w[t].steps;
        for (int e = 0; e < 6; e++) r->ends[e] += w[t].ends[e];
        if (r->paths)
            for (size_t v = 0; v < m->nvox; v++) r->paths[v] += w[t].paths[v];
        dm_sparse_merge(&r->m1, &w[t].m1);
        dm_sparse_merge(&r->m2, &w[t].m2);
        dm_sparse_merge(&r->m3, &w[t].m3);
    }
    if (rc == 0 && o->tck_max > 0)
        rc = gather_saved(w, nthreads, o->tck_max, first, r->generated, r);
    for (int t = 0; t < nthreads; t++) worker_free(&w[t]);
    free(w);
    return rc;
}

void dm_track_result_free(dm_track_result *r)
{
    free(r->paths);
    free(r->seeds_to_targets);
    free(r->network);
    dm_sparse_free(&r->m1);
    dm_sparse_free(&r->m2);
    dm_sparse_free(&r->m3);
    free(r->tck_len);
    free(r->tck_xyz);
    memset(r, 0, sizeof *r);
}
