/* The host build of the FOD tracking kernel, once per precision (the names made distinct by
 * DM_FT), and the threads that run it. */
#include "fodtrack/fodtrack_cpu.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define DM_FN static inline __attribute__((unused))
#include "maths/philox.h"

#define real double
#define DM_FT(name) dm_ft_##name##_d
#include "fodtrack/det_math.h"
#include "fodtrack/fod_field.h"
#include "fodtrack/fod_track.h"
#undef real
#undef DM_FT
#undef DM_DET_PI

#define real float
#define DM_FT(name) dm_ft_##name##_f
#include "fodtrack/det_math.h"
#include "fodtrack/fod_field.h"
#include "fodtrack/fod_track.h"
#undef real
#undef DM_FT

/* One thread's accepted streamlines, merged into the batch at the end. */
typedef struct {
    unsigned long long *id;
    int *npts, *seed_index;
    float *xyz;
    long count, cap;
    size_t npoints, cap_points;
    unsigned long long truncations, evals;
} thread_out;

static void keep(thread_out *t, unsigned long long id, int seed_index, const void *buf, int n,
                 int is_double)
{
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->id = realloc(t->id, t->cap * sizeof *t->id);
        t->npts = realloc(t->npts, t->cap * sizeof *t->npts);
        t->seed_index = realloc(t->seed_index, t->cap * sizeof *t->seed_index);
    }
    if (t->npoints + (size_t)n > t->cap_points) {
        t->cap_points = 2 * (t->npoints + (size_t)n) + 4096;
        t->xyz = realloc(t->xyz, 3 * t->cap_points * sizeof *t->xyz);
    }
    float *dst = t->xyz + 3 * t->npoints;
    for (int i = 0; i < 3 * n; i++)
        dst[i] = is_double ? (float)((const double *)buf)[i] : ((const float *)buf)[i];
    t->id[t->count] = id;
    t->npts[t->count] = n;
    t->seed_index[t->count] = seed_index;
    t->count++;
    t->npoints += (size_t)n;
}

int dm_ft_cpu_batch(const dm_ft_ctx *c, int use_double, int buf_points, unsigned long long first,
                    long n, int threads, dm_watch *watch, dm_ft_batch *b)
{
    int nt = threads > 0 ? threads : omp_get_max_threads();
    thread_out *outs = calloc(nt, sizeof *outs);
    dm_ft_batch_reset(b, first, n, 0);
    int stopped = 0;
#pragma omp parallel num_threads(nt)
    {
        thread_out *t = &outs[omp_get_thread_num()];
        size_t rs = use_double ? sizeof(double) : sizeof(float);
        void *buf = malloc(3 * (size_t)buf_points * rs);
        void *coef = malloc(DM_FOD_NCOEF_MAX * rs);
#pragma omp for schedule(dynamic, 64)
        for (long i = 0; i < n; i++) {
            int stop;
#pragma omp atomic read
            stop = stopped;
            if (stop) continue;
            if (dm_watch_stopping(watch)) { /* Ctrl-C, a cancel: leave within a streamline */
#pragma omp atomic write
                stopped = 1;
                continue;
            }
            unsigned long long id = first + (unsigned long long)i;
            int np = 0, seed = 0, v;
            if (use_double) {
                dm_ft_state_d s;
                v = dm_ft_ft_trace_d(c, id, &s, buf, coef, &np, &seed);
                b->ends[2 * i] = v == DM_FT_REJECT_SEED ? 0 : (unsigned char)s.end1;
                b->ends[2 * i + 1] =
                    v == DM_FT_REJECT_SEED || s.half != 2 ? 0 : (unsigned char)s.end2;
                t->truncations += s.truncations;
                t->evals += s.evals;
            } else {
                dm_ft_state_f s;
                v = dm_ft_ft_trace_f(c, id, &s, buf, coef, &np, &seed);
                b->ends[2 * i] = v == DM_FT_REJECT_SEED ? 0 : (unsigned char)s.end1;
                b->ends[2 * i + 1] =
                    v == DM_FT_REJECT_SEED || s.half != 2 ? 0 : (unsigned char)s.end2;
                t->truncations += s.truncations;
                t->evals += s.evals;
            }
            b->verdict[i] = (unsigned char)v;
            if (v == DM_FT_ACCEPTED) keep(t, id, seed, buf, np, use_double);
        }
        free(buf);
        free(coef);
    }
    long count = 0;
    size_t npoints = 0;
    for (int k = 0; k < nt; k++) {
        count += outs[k].count;
        npoints += outs[k].npoints;
    }
    const int no_room = dm_ft_batch_room(b, npoints ? npoints : 1) != 0;
    for (int k = 0; k < nt && !no_room; k++) {
        thread_out *t = &outs[k];
        if (t->npoints) /* a thread that traced nothing has no buffer */
            memcpy(b->xyz + 3 * b->npoints, t->xyz, 3 * t->npoints * sizeof *t->xyz);
        for (long i = 0; i < t->count; i++) {
            b->id[b->count] = t->id[i];
            b->npts[b->count] = t->npts[i];
            b->seed_index[b->count] = t->seed_index[i];
            b->start[b->count] = b->npoints;
            b->npoints += (size_t)t->npts[i];
            b->count++;
        }
        b->truncations += t->truncations;
        b->evals += t->evals;
    }
    for (int k = 0; k < nt; k++) {
        thread_out *t = &outs[k];
        free(t->id);
        free(t->npts);
        free(t->seed_index);
        free(t->xyz);
    }
    (void)count;
    free(outs);
    if (no_room) return -2;
    dm_ft_batch_sort(b);
    return stopped ? -1 : 0;
}
