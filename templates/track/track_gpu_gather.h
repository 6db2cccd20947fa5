/* What a GPU tracker thread does (templates/track/gpu_tracker.cu): trace streamlines with
 * track_kernel.h and add them to the outputs with the CPU's semantics (runtime/track/track_run.c):
 * every seed-space voxel a kept streamline visits counts once in fdt_paths, once per target in
 * seeds_to_<target>, once per column in the matrices.
 *
 * A thread's streamlines advance one step per turn of a single loop, whatever phase each is in
 * (dm_tg_thread), so that the threads of a warp keep executing the step code together; with a
 * loop per half and the bookkeeping in between, they drifted apart and a warp instruction ran
 * on 1.5 of 32 threads on average (ncu, docs/performance.md).
 *
 * Without a per-thread stamp array over all voxels (the CPU's way, too large for 10^5 threads),
 * a streamline's distinct voxels are found with a small per-thread hash set.  Matrix entries go
 * out as (row << 32 | col) keys into per-matrix buffers that the host merges into its sparse
 * matrices; a streamline whose keys do not fit goes on an overflow list and is run again (that
 * matrix only) after the host has emptied the buffer.  Plain C with DM_FN, so that a host test
 * can run it too.
 *
 * Before including: DM_FN; DM_ATOMIC_ADD_U32(p, v) and DM_ATOMIC_ADD_U64(p, v) (return the old
 * value); philox.h and track_kernel.h. */
#ifndef DIMOC_TRACK_GPU_GATHER_H
#define DIMOC_TRACK_GPU_GATHER_H

/* What a pass computes (a bit mask). */
enum {
    DM_TG_COUNTS = 1, /* statistics, waytotal, fdt_paths, seeds_to_targets */
    DM_TG_M1 = 2,
    DM_TG_M2 = 4,
    DM_TG_M3 = 8,
};
enum { DM_TG_NSTATS = 8 };                    /* waytotal, points, ends[6] */
#define DM_TG_EMPTY_KEY 0xFFFFFFFFFFFFFFFFull /* a buffer slot left unused by an overflow */

typedef struct dm_track_gpu_out {
    /* seeds */
    const float *seed_pos; /* tracking mm, 3 per seed */
    const int *seed_svox;  /* seed-space voxel of each seed, -1 outside */
    const int *seed_group; /* --network: the seed mask of each seed, else NULL */
    int ngroups;
    long long per_seed;
    /* lookups by seed-space voxel, NULL when unused */
    const int *seed_col, *t2_col, *t3_node;
    const int *target_off, *target_ids; /* compressed rows, ntargets > 0 */
    int ntargets;
    int surf_target[DM_TRACK_MAX_SURFACES]; /* target id of each surface bit, or -1 */
    unsigned long long nvox;
    /* outputs */
    unsigned int *paths;            /* NULL without --opd */
    unsigned int *seeds_to_targets; /* ntargets x nvox, NULL without --os2t */
    unsigned long long *stats;      /* DM_TG_NSTATS */
    unsigned int *network;          /* --network: ngroups x ngroups counts, then the kept
                                        streamlines of each group; else NULL */
    unsigned long long *keys[3];    /* matrix 1, 2, 3 entries; NULL when not asked for */
    unsigned long long key_cap[3];
    unsigned long long *nkeys;       /* 3 counters (may run past key_cap) */
    unsigned long long *overflow[3]; /* ids of streamlines whose keys did not fit */
    unsigned long long *noverflow;   /* 3 counters */
} dm_track_gpu_out;

/* Per-thread scratch of a launch, thread t owning [t * stride, (t + 1) * stride) of each
 * array (a: la ints, b: lb ints, the distinct-voxel set: 1 << set_bits ints, -1 when empty,
 * the loop check table: loop_cap slots). */
typedef struct dm_track_gpu_scratch {
    int *a, *b, *set;
    int la, lb, set_bits;
    int *loop_keys, *loop_used; /* NULL without --loopcheck */
    float *loop_dirs;
    int loop_cap;
} dm_track_gpu_scratch;

/* Sorts a[0..n) (heapsort: no recursion, no extra memory) and drops repeats; returns the new
 * length. */
DM_FN int dm_tg_sort_unique(int *a, int n)
{
    for (int start = n / 2 - 1, end = n;;) {
        int root;
        if (start >= 0) {
            root = start--;
        } else {
            if (--end <= 0) break;
            int t = a[0];
            a[0] = a[end];
            a[end] = t;
            root = 0;
        }
        for (;;) { /* sift down within a[0..end) */
            int child = 2 * root + 1;
            if (child >= end) break;
            if (child + 1 < end && a[child + 1] > a[child]) child++;
            if (a[root] >= a[child]) break;
            int t = a[root];
            a[root] = a[child];
            a[child] = t;
            root = child;
        }
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || a[i] != a[m - 1]) a[m++] = a[i];
    return m;
}

/* Reserves n key slots of matrix j; -1 (and the streamline on the overflow list) when they do
 * not fit. */
DM_FN long long dm_tg_reserve(const dm_track_gpu_out *o, int j, unsigned long long n,
                              unsigned long long id)
{
    if (n == 0) return 0;
    unsigned long long at = DM_ATOMIC_ADD_U64(&o->nkeys[j], n);
    if (at + n <= o->key_cap[j]) return (long long)at;
    for (unsigned long long i = at; i < o->key_cap[j]; i++) o->keys[j][i] = DM_TG_EMPTY_KEY;
    unsigned long long slot = DM_ATOMIC_ADD_U64(&o->noverflow[j], 1);
    o->overflow[j][slot] = id;
    return -1;
}

/* The distinct voxels of the streamline's kept halves (bit i of halves: h[i]) into b (in
 * first-visit order); set (1 << bits slots, at least twice the points) is all -1 before and
 * after. */
DM_FN int dm_tg_distinct(const dm_track_half h[2], int halves, int *set, int bits, int *b)
{
    const unsigned int mask = (1u << bits) - 1;
    int m = 0, last = -1;
    for (int i = 0; i < 2; i++)
        for (int p = 0; (halves >> i & 1) && p < h[i].npts; p++) {
            int v = h[i].svox[p];
            if (v < 0 || v == last) continue; /* consecutive repeats: most of them */
            last = v;
            unsigned int slot = ((unsigned int)v * 2654435761u) >> (32 - bits);
            while (set[slot] >= 0 && set[slot] != v) slot = (slot + 1) & mask;
            if (set[slot] < 0) {
                set[slot] = v;
                b[m++] = (int)slot;
            }
        }
    for (int i = 0; i < m; i++) { /* slots to voxels, and the set emptied */
        int slot = b[i];
        b[i] = set[slot];
        set[slot] = -1;
    }
    return m;
}

/* Adds streamline id (of seed k, traced into h, whose svox arrays lie in s->a; halves: those
 * kept, dm_track_verdict) to the outputs that `what` names.  st: this thread's statistics. */
DM_FN void dm_tg_add(const dm_track_ctx *c, const dm_track_gpu_out *o,
                     const dm_track_gpu_scratch *s, unsigned long long id, long long k,
                     const dm_track_half h[2], int halves, int what,
                     unsigned long long st[DM_TG_NSTATS])
{
    if (what & DM_TG_COUNTS) {
        for (int i = 0; i < 2; i++) {
            st[2 + h[i].end]++;
            st[1] += (unsigned long long)h[i].npts;
        }
        st[0] += halves != 0;
    }
    if (!halves) return;
    int *a = s->a, *b = s->b;
    int m = dm_tg_distinct(h, halves, s->set, s->set_bits, b); /* a is free from here on */
    int own = o->seed_svox[k];
    if ((what & DM_TG_COUNTS) && o->network) { /* the other seed masks reached */
        unsigned int reached = 0;
        int g = o->seed_group[k], ng = o->ngroups;
        for (int i = 0; i < m; i++) reached |= c->waybits[b[i]];
        reached &= c->waymask & ~(1u << g);
        for (int j = 0; j < ng; j++)
            if (reached >> j & 1u) DM_ATOMIC_ADD_U32(&o->network[g * ng + j], 1u);
        DM_ATOMIC_ADD_U32(&o->network[ng * ng + g], 1u);
    }
    if (what & DM_TG_COUNTS) {
        if (o->paths)
            for (int i = 0; i < m; i++) DM_ATOMIC_ADD_U32(&o->paths[b[i]], 1u);
        if (o->seeds_to_targets && own >= 0) {
            unsigned int *seen = (unsigned int *)a; /* a bit per target */
            int words = o->ntargets / 32 + 1;
            for (int w = 0; w < words; w++) seen[w] = 0;
            for (int i = 0; i < m; i++)
                for (int t = o->target_off[b[i]]; t < o->target_off[b[i] + 1]; t++) {
                    int id_t = o->target_ids[t];
                    unsigned int bit = 1u << (id_t & 31);
                    if (seen[id_t >> 5] & bit) continue;
                    seen[id_t >> 5] |= bit;
                    DM_ATOMIC_ADD_U32(
                        &o->seeds_to_targets[(unsigned long long)id_t * o->nvox + own], 1u);
                }
            unsigned int crossed =
                (halves & 1 ? h[0].surfaces : 0u) | (halves & 2 ? h[1].surfaces : 0u);
            for (int bit = DM_TRACK_SURF_FIRST; bit < DM_TRACK_MAX_SURFACES && crossed >> bit;
                 bit++) {
                int id_t = o->surf_target[bit];
                if (!(crossed >> bit & 1u) || id_t < 0 || (seen[id_t >> 5] >> (id_t & 31) & 1u))
                    continue;
                seen[id_t >> 5] |= 1u << (id_t & 31);
                DM_ATOMIC_ADD_U32(&o->seeds_to_targets[(unsigned long long)id_t * o->nvox + own],
                                  1u);
            }
        }
    }
    unsigned long long row = (unsigned long long)k << 32;
    if ((what & DM_TG_M1) && o->seed_col) {
        unsigned long long n = 0;
        for (int i = 0; i < m; i++) n += o->seed_col[b[i]] >= 0 && b[i] != own;
        long long at = dm_tg_reserve(o, 0, n, id);
        if (at >= 0)
            for (int i = 0; i < m; i++)
                if (o->seed_col[b[i]] >= 0 && b[i] != own)
                    o->keys[0][at++] = row | (unsigned int)o->seed_col[b[i]];
    }
    if ((what & DM_TG_M2) && o->t2_col) {
        int n = 0;
        for (int i = 0; i < m; i++)
            if (o->t2_col[b[i]] >= 0) a[n++] = o->t2_col[b[i]];
        n = dm_tg_sort_unique(a, n);
        long long at = dm_tg_reserve(o, 1, (unsigned long long)n, id);
        if (at >= 0)
            for (int i = 0; i < n; i++) o->keys[1][at++] = row | (unsigned int)a[i];
    }
    if ((what & DM_TG_M3) && o->t3_node) {
        int n = 0;
        for (int i = 0; i < m; i++)
            if (o->t3_node[b[i]] >= 0) a[n++] = o->t3_node[b[i]];
        n = dm_tg_sort_unique(a, n); /* increasing: every pair (i < j) is already ordered */
        long long at = dm_tg_reserve(o, 2, (unsigned long long)n * (n - 1) / 2, id);
        if (at >= 0)
            for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++)
                    o->keys[2][at++] =
                        (unsigned long long)(unsigned int)a[i] << 32 | (unsigned int)a[j];
    }
}

/* Phases of a thread's current streamline. */
enum { DM_TG_IDLE, DM_TG_BEGIN, DM_TG_STEP, DM_TG_ENDED, DM_TG_FINISH };

/* One thread's share of a launch of n streamlines: streamline i is first + i, or ids[i] when
 * ids is given (re-runs of overflowed streamlines).  persistent: the thread takes the next i
 * from the shared counter *next whenever its streamline ends; else (a benchmark knob) i = t,
 * t + stride, ...  Each turn of the loop advances the current streamline by one step or one
 * phase, so that every thread of a warp passes through the same step code each turn.  The
 * results are those of dm_track_streamline, streamline by streamline.  loop: NULL without
 * --loopcheck. */
DM_FN void dm_tg_thread(const dm_track_ctx *c, const dm_track_gpu_out *o,
                        const dm_track_gpu_scratch *s, dm_track_loop *loop,
                        unsigned long long first, unsigned long long n,
                        const unsigned long long *ids, int what, unsigned long long *next,
                        int persistent, unsigned long long t, unsigned long long stride,
                        unsigned long long st[DM_TG_NSTATS])
{
    dm_track_half h[2];
    h[0].pts = h[1].pts = 0;
    h[0].svox = s->a;
    h[1].svox = s->a + c->half_steps + 1;
    dm_rng rng;
    dm_track_walk w;
    float start[3] = {0, 0, 0}, d0[3] = {0, 0, 1}, back[3] = {0, 0, -1};
    unsigned long long id = 0, round = 0;
    long long k = 0;
    int phase = DM_TG_IDLE, half = 0, halves = 0;
    unsigned int own_bit = 0;
    for (;;) {
        if (phase == DM_TG_IDLE) {
            unsigned long long i =
                persistent ? DM_ATOMIC_ADD_U64(next, 1ull) : t + stride * round++;
            if (i >= n) break;
            id = ids ? ids[i] : first + i;
            k = (long long)(id / (unsigned long long)o->per_seed);
            own_bit = o->seed_group ? 1u << o->seed_group[k] : 0u;
            half = 0;
            int rejected;
            if (dm_track_streamline_start(c, o->seed_pos + 3 * k, id, &rng, h, start, d0,
                                          &rejected)) {
                for (int a = 0; a < 3; a++) back[a] = -d0[a];
                phase = DM_TG_BEGIN;
            } else {
                halves = rejected ? 0 : dm_track_verdict(c, h, own_bit);
                phase = DM_TG_FINISH;
            }
        }
        if (phase == DM_TG_BEGIN)
            phase = dm_track_half_begin(c, start, half ? back : d0, loop, &h[half], &w)
                        ? DM_TG_STEP
                        : DM_TG_ENDED;
        else if (phase == DM_TG_STEP && !dm_track_half_step(c, &rng, loop, &h[half], &w))
            phase = DM_TG_ENDED;
        if (phase == DM_TG_ENDED) {
            if (h[half].end == DM_TRACK_END_AVOID) {
                if (half == 0) { /* the second half is not run */
                    h[1].npts = 0;
                    h[1].end = DM_TRACK_END_AVOID;
                }
                halves = 0;
                phase = DM_TG_FINISH;
            } else if (half == 0) {
                half = 1;
                phase = DM_TG_BEGIN;
            } else {
                halves = dm_track_verdict(c, h, own_bit);
                phase = DM_TG_FINISH;
            }
        }
        if (phase == DM_TG_FINISH) {
            dm_tg_add(c, o, s, id, k, h, halves, what, st);
            phase = DM_TG_IDLE;
        }
    }
}

#endif
