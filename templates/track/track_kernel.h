/* The propagation of one probabilistic streamline (probtrackx semantics), written once in
 * plain C so that the host build (runtime/track/track_kernel_host.h) and the CUDA build
 * (templates/track/gpu_tracker.cu, compiled by NVRTC) share it: no allocation, no library calls
 * beyond floorf, fabsf, sqrtf (and philox.h's), all state in small structs, all memory
 * passed in.
 *
 * Coordinates.  Tracking runs in the diffusion image's "scaled voxel" space: a point p (mm)
 * lies at voxel coordinates p / vox, voxel centres at integers.  Fibre directions are unit
 * vectors in the voxel axes (already converted from the samples' frame when loaded).  Every
 * recorded point is also mapped into the seed space (the grid of the seed image or --seedref)
 * by the affine diff2seed, rounded to the nearest voxel; the constraint masks live there.
 *
 * One streamline (id = seed * P + sample) draws its random numbers from the Philox stream
 * (rseed, id), so its path depends on nothing but those two numbers.
 *
 * Before including: DM_FN (see templates/fit/model_api.h), <math.h>, templates/maths/philox.h. */
#ifndef DIMOC_TRACK_KERNEL_H
#define DIMOC_TRACK_KERNEL_H

#include "track/track_surface_hit.h"

#define DM_TRACK_MAX_FIBRES 8
#define DM_TRACK_LOOP_RATIO 5 /* loop check cells are 5x5x5 voxels, as in probtrackx */

/* Seed-space voxel flags. */
enum { DM_TRACK_FLAG_STOP = 1, DM_TRACK_FLAG_AVOID = 2 };

/* Surface bits (dm_track_surface.tri_bit): the exclusion and stop surfaces, then one bit for
 * each waypoint or target surface (bit DM_TRACK_SURF_FIRST and up). */
#define DM_TRACK_SURF_AVOID 1u
#define DM_TRACK_SURF_STOP 2u
#define DM_TRACK_SURF_FIRST 2
#define DM_TRACK_MAX_SURFACES 32

/* Why a half-streamline ended. */
enum {
    DM_TRACK_END_STEPS = 0, /* step limit */
    DM_TRACK_END_MASK = 1,  /* the next point left the brain mask or the image */
    DM_TRACK_END_CURVATURE = 2,
    DM_TRACK_END_STOP = 3,  /* entered the stop mask (that point is kept) */
    DM_TRACK_END_AVOID = 4, /* entered the exclusion mask or crossed the exclusion surface:
                                the whole streamline is rejected */
    DM_TRACK_END_LOOP = 5,
};

typedef struct dm_track_ctx {
    /* orientation samples (diffusion grid) */
    int nx, ny, nz, nsamples, nfibres;
    float vox[3];
    const float *dirs;          /* unit vectors: 3 floats at ((v * nsamples + s) * nfibres + k) */
    const float *fracs;         /* fractions at ((v * nsamples + s) * nfibres + k) */
    const unsigned char *brain; /* nonzero inside the brain mask */
    /* seed space */
    int sx, sy, sz;
    float diff2seed[3][4];       /* tracking mm -> seed voxel coordinates */
    const unsigned char *flags;  /* DM_TRACK_FLAG_* per seed voxel, or NULL */
    const unsigned int *waybits; /* bit w: inside waypoint mask w, or NULL */
    unsigned int waymask;        /* the bits of all waypoints (masks and surfaces), 0: none */
    int waycond_and;             /* 1: every waypoint (AND), 0: any one (OR) */
    int oneway;                  /* --onewaycondition: each half meets the condition alone */
    int network;                 /* --network: waypoint bit g is seed mask g; a streamline must
                                     reach a mask other than its own (OR) */
    dm_track_surface surfaces;   /* GIFTI surfaces (cell_off NULL: none): a step crossing the
                                     exclusion surface rejects the streamline, one crossing the
                                     stop surface ends it there */
    unsigned int surf_way[DM_TRACK_MAX_SURFACES]; /* waypoint bit of each surface bit, or 0 */
    /* options */
    int half_steps;  /* steps of each half (probtrackx: --nsteps / 2) */
    float step;      /* mm */
    float cthr;      /* minimum |cos| between successive steps */
    float fibthresh; /* fibres with f <= fibthresh are not followed (unless none is above) */
    int randfib;     /* 0..3: how the first fibre at the seed is chosen (see pick_initial) */
    int fibst;       /* 0-based fibre that randfib 0 starts on */
    int modeuler;    /* modified Euler (midpoint) integration */
    int loopcheck;
    int nearest;      /* 1: sample the nearest voxel; 0: probabilistic interpolation */
    float distthresh; /* streamlines shorter than this (mm) are rejected */
    float sampvox;    /* > 0: each streamline starts at a uniform point of the ball of this
                         radius (mm) around its seed */
    unsigned long long rseed;
} dm_track_ctx;

/* One half of a streamline: caller-owned buffers of half_steps + 1 points. */
typedef struct dm_track_half {
    float *pts; /* 3 floats per point, tracking mm; pts[0..2] is the seed (NULL: not kept) */
    int *svox;  /* seed-space voxel index of each point, -1 outside the seed grid */
    int npts;
    int end;               /* DM_TRACK_END_* */
    unsigned int surfaces; /* bits of the surfaces its steps crossed */
} dm_track_half;

/* Loop check scratch: an open-addressed table of coarse cells (cap a power of two, at least
 * 2 * half_steps), with the direction of the last visit. */
typedef struct dm_track_loop {
    int *keys;   /* -1: empty */
    float *dirs; /* 3 per slot */
    int *used;   /* slots filled in this half, to clear them cheaply */
    int cap, nused;
} dm_track_loop;

DM_FN int dm_track_clampi(int i, int n)
{
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* Diffusion voxel index of tracking point p, nearest voxel, or -1 outside the image. */
DM_FN long dm_track_voxel_nearest(const dm_track_ctx *c, const float p[3])
{
    int i = (int)floorf(p[0] / c->vox[0] + 0.5f), j = (int)floorf(p[1] / c->vox[1] + 0.5f),
        k = (int)floorf(p[2] / c->vox[2] + 0.5f);
    if (i < 0 || j < 0 || k < 0 || i >= c->nx || j >= c->ny || k >= c->nz) return -1;
    return ((long)k * c->ny + j) * c->nx + i;
}

/* Voxel to sample the orientations from.  Probabilistic interpolation (thesis 6.2.4,
 * probtrackx): along each axis the lower or the upper neighbour, with probability 1 - frac and
 * frac of the position between them, so that the expected orientation is the trilinear mix.
 * A neighbour outside the image or the brain falls back to the nearest voxel. */
DM_FN long dm_track_voxel_sample(const dm_track_ctx *c, const float p[3], dm_rng *rng)
{
    long nearest = dm_track_voxel_nearest(c, p);
    if (c->nearest || nearest < 0) return nearest;
    int idx[3];
    const int n[3] = {c->nx, c->ny, c->nz};
    for (int a = 0; a < 3; a++) {
        float x = p[a] / c->vox[a];
        float lo = floorf(x);
        idx[a] = (int)lo + (dm_rng_uniform(rng) < (double)(x - lo) ? 1 : 0);
        if (idx[a] < 0 || idx[a] >= n[a]) return nearest;
    }
    long v = ((long)idx[2] * c->ny + idx[1]) * c->nx + idx[0];
    return c->brain[v] ? v : nearest;
}

/* The first fibre at the seed (probtrackx --randfib): 0 fibre fibst; 1 uniformly among the
 * fibres with f > fibthresh; 2 among those, in proportion to f; 3 among all fibres, in
 * proportion to f.  Falls back to fibre fibst (0 for randfib 1..3) when no fibre qualifies. */
DM_FN int dm_track_pick_initial(const dm_track_ctx *c, const float *f, dm_rng *rng)
{
    int nf = c->nfibres, fallback = c->randfib == 0 && c->fibst < nf ? c->fibst : 0;
    if (c->randfib == 0) return fallback;
    double total = 0;
    int count = 0;
    for (int k = 0; k < nf; k++) {
        int ok = c->randfib == 3 || f[k] > c->fibthresh;
        if (!ok) continue;
        count++;
        total += c->randfib == 1 ? 1.0 : (f[k] > 0 ? f[k] : 0);
    }
    if (count == 0 || !(total > 0)) return fallback;
    double u = dm_rng_uniform(rng) * total, acc = 0;
    int last = fallback;
    for (int k = 0; k < nf; k++) {
        int ok = c->randfib == 3 || f[k] > c->fibthresh;
        if (!ok) continue;
        acc += c->randfib == 1 ? 1.0 : (f[k] > 0 ? f[k] : 0);
        last = k;
        if (u < acc) return k;
    }
    return last;
}

/* Draws an orientation at p: a random sample of a voxel chosen as above, and in it the fibre
 * closest to prev (|cos|) among those with f > fibthresh (fibre 1 when none is), its sign
 * flipped to continue along prev.  prev NULL: the first fibre by the --randfib rule.  Returns
 * 0, or -1 when p is outside the image. */
DM_FN int dm_track_sample_dir(const dm_track_ctx *c, const float p[3], const float *prev,
                              dm_rng *rng, float out[3])
{
    long v = dm_track_voxel_sample(c, p, rng);
    if (v < 0) return -1;
    int s = (int)(dm_rng_uniform(rng) * c->nsamples);
    if (s >= c->nsamples) s = c->nsamples - 1;
    long base = (v * c->nsamples + s) * c->nfibres;
    const float *f = c->fracs + base, *d = c->dirs + 3 * base;
    int best = 0;
    if (!prev) {
        best = dm_track_pick_initial(c, f, rng);
    } else {
        float best_dot = -1;
        for (int k = 0; k < c->nfibres; k++) {
            if (!(f[k] > c->fibthresh)) continue;
            float dot = fabsf(d[3 * k] * prev[0] + d[3 * k + 1] * prev[1] + d[3 * k + 2] * prev[2]);
            if (dot > best_dot) {
                best_dot = dot;
                best = k;
            }
        }
    }
    float sign = 1;
    if (prev && d[3 * best] * prev[0] + d[3 * best + 1] * prev[1] + d[3 * best + 2] * prev[2] < 0)
        sign = -1;
    for (int a = 0; a < 3; a++) out[a] = sign * d[3 * best + a];
    return 0;
}

/* Seed-space voxel of tracking point p (nearest), or -1 outside the seed grid. */
DM_FN int dm_track_seed_voxel(const dm_track_ctx *c, const float p[3])
{
    int idx[3];
    const int n[3] = {c->sx, c->sy, c->sz};
    for (int a = 0; a < 3; a++) {
        float x = c->diff2seed[a][0] * p[0] + c->diff2seed[a][1] * p[1] +
                  c->diff2seed[a][2] * p[2] + c->diff2seed[a][3];
        idx[a] = (int)floorf(x + 0.5f);
        if (idx[a] < 0 || idx[a] >= n[a]) return -1;
    }
    return (idx[2] * c->sy + idx[1]) * c->sx + idx[0];
}

/* Loop check at p moving along d: a loop is a return to a coarse cell against the direction
 * of the last visit there (cos < 0).  Returns 1 on a loop. */
DM_FN int dm_track_loop_visit(const dm_track_ctx *c, dm_track_loop *t, const float p[3],
                              const float d[3])
{
    int ci = (int)floorf(p[0] / c->vox[0] + 0.5f) / DM_TRACK_LOOP_RATIO;
    int cj = (int)floorf(p[1] / c->vox[1] + 0.5f) / DM_TRACK_LOOP_RATIO;
    int ck = (int)floorf(p[2] / c->vox[2] + 0.5f) / DM_TRACK_LOOP_RATIO;
    int cnx = c->nx / DM_TRACK_LOOP_RATIO + 1, cny = c->ny / DM_TRACK_LOOP_RATIO + 1;
    int key = (ck * cny + cj) * cnx + ci;
    unsigned int h = (unsigned int)key * 2654435761u;
    int slot = (int)(h & (unsigned int)(t->cap - 1));
    for (int probe = 0; probe < t->cap; probe++) {
        if (t->keys[slot] == key) {
            float *old = t->dirs + 3 * slot;
            int loop = old[0] * d[0] + old[1] * d[1] + old[2] * d[2] < 0;
            old[0] = d[0];
            old[1] = d[1];
            old[2] = d[2];
            return loop;
        }
        if (t->keys[slot] < 0) {
            if (t->nused * 2 > t->cap) return 0; /* full enough: stop recording new cells */
            t->keys[slot] = key;
            t->dirs[3 * slot] = d[0];
            t->dirs[3 * slot + 1] = d[1];
            t->dirs[3 * slot + 2] = d[2];
            t->used[t->nused++] = slot;
            return 0;
        }
        slot = (slot + 1) & (t->cap - 1);
    }
    return 0;
}

DM_FN void dm_track_loop_clear(dm_track_loop *t)
{
    for (int i = 0; i < t->nused; i++) t->keys[t->used[i]] = -1;
    t->nused = 0;
}

/* Records point p into the half; returns its constraint flags. */
DM_FN int dm_track_record(const dm_track_ctx *c, dm_track_half *h, const float p[3])
{
    int n = h->npts++;
    if (h->pts) {
        h->pts[3 * n] = p[0];
        h->pts[3 * n + 1] = p[1];
        h->pts[3 * n + 2] = p[2];
    }
    int sv = dm_track_seed_voxel(c, p);
    h->svox[n] = sv;
    return sv >= 0 && c->flags ? c->flags[sv] : 0;
}

/* A half-streamline in progress.  The CPU runs each half to its end (dm_track_half_run); the
 * GPU advances a thread's streamline one step per turn of a loop shared by all its phases, so
 * that the threads of a warp, whatever streamline and half each is on, execute the same step
 * code together (templates/track/track_gpu_gather.h). */
typedef struct dm_track_walk {
    float p[3], prev[3];
    int it;        /* steps taken */
    int seed_svox; /* seed-space voxel of the seed: the stop mask does not apply there */
} dm_track_walk;

/* Starts a half at seed along dir0 (records the seed).  Returns 1 when steps follow, 0 when
 * the half has already ended (h->end says why).  The stop mask is not applied in the seed's
 * own voxel (a seed inside a stop region could not leave it otherwise). */
DM_FN int dm_track_half_begin(const dm_track_ctx *c, const float seed[3], const float dir0[3],
                              dm_track_loop *loop, dm_track_half *h, dm_track_walk *w)
{
    for (int a = 0; a < 3; a++) {
        w->p[a] = seed[a];
        w->prev[a] = dir0[a];
    }
    w->it = 0;
    h->npts = 0;
    h->end = DM_TRACK_END_STEPS;
    h->surfaces = 0;
    int flags = dm_track_record(c, h, w->p);
    w->seed_svox = h->svox[0];
    if (flags & DM_TRACK_FLAG_AVOID) {
        h->end = DM_TRACK_END_AVOID;
        return 0;
    }
    if (loop) dm_track_loop_clear(loop);
    return c->half_steps >= 1;
}

/* One step of the half.  Returns 1 when more follow, 0 when the half has ended. */
DM_FN int dm_track_half_step(const dm_track_ctx *c, dm_rng *rng, dm_track_loop *loop,
                             dm_track_half *h, dm_track_walk *w)
{
    float *p = w->p, *prev = w->prev, d[3];
    int it = ++w->it;
    if (it == 1) {
        d[0] = prev[0];
        d[1] = prev[1];
        d[2] = prev[2];
    } else {
        if (dm_track_sample_dir(c, p, prev, rng, d) != 0) {
            h->end = DM_TRACK_END_MASK;
            return 0;
        }
        if (fabsf(d[0] * prev[0] + d[1] * prev[1] + d[2] * prev[2]) < c->cthr) {
            h->end = DM_TRACK_END_CURVATURE;
            return 0;
        }
    }
    if (c->modeuler) { /* the direction at the Euler point, averaged with the first */
        float mid[3] = {p[0] + c->step * d[0], p[1] + c->step * d[1], p[2] + c->step * d[2]};
        long mv = dm_track_voxel_nearest(c, mid);
        float d2[3];
        if (mv >= 0 && c->brain[mv] && dm_track_sample_dir(c, mid, d, rng, d2) == 0) {
            float s0 = d[0] + d2[0], s1 = d[1] + d2[1], s2 = d[2] + d2[2];
            float norm = sqrtf(s0 * s0 + s1 * s1 + s2 * s2);
            if (norm > 1e-6f) {
                d[0] = s0 / norm;
                d[1] = s1 / norm;
                d[2] = s2 / norm;
            }
        }
    }
    float q[3] = {p[0] + c->step * d[0], p[1] + c->step * d[1], p[2] + c->step * d[2]};
    long v = dm_track_voxel_nearest(c, q);
    if (v < 0 || !c->brain[v]) {
        h->end = DM_TRACK_END_MASK;
        return 0;
    }
    if (loop && dm_track_loop_visit(c, loop, q, d)) {
        h->end = DM_TRACK_END_LOOP;
        return 0;
    }
    unsigned int crossed =
        c->surfaces.cell_off ? dm_track_segment_surfaces(&c->surfaces, p, q) : 0u;
    if (crossed & DM_TRACK_SURF_AVOID) {
        h->end = DM_TRACK_END_AVOID;
        return 0;
    }
    int flags = dm_track_record(c, h, q);
    h->surfaces |= crossed;
    if (flags & DM_TRACK_FLAG_AVOID) {
        h->end = DM_TRACK_END_AVOID;
        return 0;
    }
    /* a stop surface ends the streamline at the first point past it */
    if ((crossed & DM_TRACK_SURF_STOP) ||
        ((flags & DM_TRACK_FLAG_STOP) && h->svox[h->npts - 1] != w->seed_svox)) {
        h->end = DM_TRACK_END_STOP;
        return 0;
    }
    for (int a = 0; a < 3; a++) {
        p[a] = q[a];
        prev[a] = d[a];
    }
    return it < c->half_steps;
}

/* One half: from seed along dir0, to its end. */
DM_FN void dm_track_half_run(const dm_track_ctx *c, const float seed[3], const float dir0[3],
                             dm_rng *rng, dm_track_loop *loop, dm_track_half *h)
{
    dm_track_walk w;
    if (dm_track_half_begin(c, seed, dir0, loop, h, &w))
        while (dm_track_half_step(c, rng, loop, h, &w)) {
        }
}

/* The start of streamline id: its random stream, its starting point (the seed, or with
 * --sampvox a uniform point of the ball around it) into start, and its first orientation
 * there (the --randfib rule) into d0.  Returns 1 when its two halves follow (along d0, then
 * against it); 0 for a start outside the brain mask or the image, a one-point streamline:
 * h[0] holds the start, both halves end as "mask", and *rejected says whether it lies in the
 * exclusion mask. */
DM_FN int dm_track_streamline_start(const dm_track_ctx *c, const float seed[3],
                                    unsigned long long id, dm_rng *rng, dm_track_half h[2],
                                    float start[3], float d0[3], int *rejected)
{
    dm_rng_init(rng, c->rseed, id);
    for (int a = 0; a < 3; a++) start[a] = seed[a];
    if (c->sampvox > 0) {
        float u[3], r2;
        do { /* rejection from the cube: 52% of draws land in the ball */
            for (int a = 0; a < 3; a++) u[a] = (float)(2 * dm_rng_uniform(rng) - 1);
            r2 = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
        } while (r2 > 1);
        for (int a = 0; a < 3; a++) start[a] += c->sampvox * u[a];
    }
    d0[0] = 0;
    d0[1] = 0;
    d0[2] = 1;
    *rejected = 0;
    long sv = dm_track_voxel_nearest(c, start);
    if (sv >= 0 && c->brain[sv] && dm_track_sample_dir(c, start, 0, rng, d0) == 0) return 1;
    h[0].npts = h[1].npts = 0;
    h[0].surfaces = h[1].surfaces = 0;
    int flags = dm_track_record(c, &h[0], start);
    h[0].end = h[1].end = DM_TRACK_END_MASK;
    *rejected = (flags & DM_TRACK_FLAG_AVOID) != 0;
    return 0;
}

/* The waypoints (bits) a half visits: masks it has a point in, surfaces it crossed. */
DM_FN unsigned int dm_track_half_waypoints(const dm_track_ctx *c, const dm_track_half *h)
{
    unsigned int seen = 0;
    if (c->waybits)
        for (int i = 0; i < h->npts; i++)
            if (h->svox[i] >= 0) seen |= c->waybits[h->svox[i]];
    for (int b = DM_TRACK_SURF_FIRST; b < DM_TRACK_MAX_SURFACES && h->surfaces >> b; b++)
        if (h->surfaces >> b & 1u) seen |= c->surf_way[b];
    return seen & c->waymask;
}

DM_FN int dm_track_waycond_met(const dm_track_ctx *c, unsigned int seen)
{
    return c->waycond_and ? seen == c->waymask : seen != 0;
}

/* Which halves of a streamline that no exclusion ended are kept (bit 0: the first half, bit
 * 1: the second; 0: the streamline is rejected).  --distthresh rejects streamlines shorter
 * than it (mm, both halves together); the waypoint condition holds for the whole streamline,
 * or with --onewaycondition for each half alone (a half that misses it is dropped).  own: the
 * waypoint bit of the streamline's own seed mask in --network mode (ignored), else 0. */
DM_FN int dm_track_verdict(const dm_track_ctx *c, const dm_track_half h[2], unsigned int own)
{
    int steps = (h[0].npts > 1 ? h[0].npts - 1 : 0) + (h[1].npts > 1 ? h[1].npts - 1 : 0);
    if (c->distthresh > 0 && c->step * (float)steps < c->distthresh) return 0;
    if (!c->waymask) return 3;
    unsigned int a = dm_track_half_waypoints(c, &h[0]) & ~own,
                 b = dm_track_half_waypoints(c, &h[1]) & ~own;
    if (!c->oneway) return dm_track_waycond_met(c, a | b) ? 3 : 0;
    return (dm_track_waycond_met(c, a) ? 1 : 0) | (dm_track_waycond_met(c, b) ? 2 : 0);
}

/* A whole streamline: its start, then one half along the first orientation and one half
 * against it.  Returns the halves kept (dm_track_verdict, own as there), 0 also when an
 * exclusion mask or surface rejected it. */
DM_FN int dm_track_streamline(const dm_track_ctx *c, const float seed[3], unsigned long long id,
                              dm_track_half h[2], dm_track_loop *loop, unsigned int own)
{
    dm_rng rng;
    float start[3], d0[3];
    int rejected;
    if (!dm_track_streamline_start(c, seed, id, &rng, h, start, d0, &rejected)) {
        if (rejected) return 0;
    } else {
        float back[3] = {-d0[0], -d0[1], -d0[2]};
        dm_track_half_run(c, start, d0, &rng, c->loopcheck ? loop : 0, &h[0]);
        if (h[0].end == DM_TRACK_END_AVOID) {
            /* The second half is not run; callers still read its length and end. */
            h[1].npts = 0;
            h[1].end = DM_TRACK_END_AVOID;
            return 0;
        }
        dm_track_half_run(c, start, back, &rng, c->loopcheck ? loop : 0, &h[1]);
        if (h[1].end == DM_TRACK_END_AVOID) return 0;
    }
    return dm_track_verdict(c, h, own);
}

#endif
