#include "commit/commit_dict_gpu.h"

#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "gpu/gpu_stage.h"
#include "io/bigalloc.h"
#include "util/error.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DM_FN static inline __attribute__((unused))
#define DM_WALK_GROW(s, k) (-1) /* only the types are used here */
#include "commit/commit_walk.h"

/* Device bytes a block's point and streamline take beyond its pieces (xyz; start, npoints,
 * count, at, length, norm, dest), and the pieces a point is allowed for (a step is rarely cut
 * into more than two). */
#define BYTES_PER_POINT 12
#define BYTES_PER_STREAMLINE 52
#define PIECE_BYTES (sizeof(dm_walk_piece) + 10) /* scratch, then the segment arrays */

/* Device arrays of one call, freed together. */
typedef struct {
    const dm_cuda *cu;
    CUdeviceptr a[24];
    int n;
} dev_list;

static int dev_alloc(dev_list *l, CUdeviceptr *d, size_t bytes)
{
    const dm_cuda *cu = l->cu;
    CK(cu->cuMemAlloc(d, bytes ? bytes : 8), "allocating GPU memory for the dictionary");
    l->a[l->n++] = *d;
    return 0;
fail:
    *d = 0;
    return -1;
}

static int dev_up(dev_list *l, CUdeviceptr *d, const void *host, size_t bytes)
{
    const dm_cuda *cu = l->cu;
    if (dev_alloc(l, d, bytes) != 0) return -1;
    CK(cu->cuMemcpyHtoDAsync(*d, host, bytes, 0), "copying the dictionary's inputs to the GPU");
    return 0;
fail:
    return -1;
}

static int dev_down(const dm_cuda *cu, void *host, CUdeviceptr d, size_t bytes)
{
    CK(cu->cuMemcpyDtoHAsync(host, d, bytes, 0), "copying the dictionary from the GPU");
    CK(cu->cuStreamSynchronize(0), "copying the dictionary from the GPU");
    return 0;
fail:
    return -1;
}

/* Frees the arrays from index `keep` on. */
static void dev_free_from(dev_list *l, int keep)
{
    for (; l->n > keep; l->n--) l->cu->cuMemFree(l->a[l->n - 1]);
}

static int launch(const dm_commit_gpu_walk *w, CUfunction fn, void **args)
{
    return dm_gpu_launch(w->cu, fn, w->threads, w->block, 0, args, "the dictionary's walk");
}

/* The end of the block of streamlines from b0: as many as fit `room` device bytes with their
 * points and a piece and a half a point (at least one streamline). */
static long block_end(const dm_tck *t, long b0, long end, size_t room)
{
    long lo = b0 + 1, hi = end; /* the largest b1 in [lo, hi] that fits */
    while (lo < hi) {
        const long mid = lo + (hi - lo + 1) / 2;
        const double pts = (double)(t->start[mid] - t->start[b0]), str = (double)(mid - b0);
        if (pts * (BYTES_PER_POINT + 1.5 * PIECE_BYTES) + str * BYTES_PER_STREAMLINE <=
            (double)room)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Room for n segments in the host arrays of d (cap: their capacity, grown to at least n). */
static int host_room(dm_commit_dict *d, long n, long *cap)
{
    if (n <= *cap) return 0;
    long c = *cap ? *cap : n;
    while (c < n) c += c / 2;
    unsigned *v = realloc(d->seg_vox, (size_t)c * sizeof *v);
    if (v) d->seg_vox = v;
    unsigned short *r = realloc(d->seg_dir, (size_t)c * sizeof *r);
    if (r) d->seg_dir = r;
    float *l = realloc(d->seg_len, (size_t)c * sizeof *l);
    if (l) d->seg_len = l;
    if (!v || !r || !l) return dm_set_error("commit: out of memory for the dictionary");
    *cap = c;
    return 0;
}

int dm_commit_dict_cut_gpu(dm_commit_gpu *g, const dm_tck *t, long first, long end,
                           const dm_commit_grid *grid, const dm_commit_dirs *dirs,
                           const dm_commit_dict_options *o, dm_commit_dict *d)
{
    const long n = t->count;
    if ((size_t)grid->nx * grid->ny * grid->nz > UINT_MAX)
        return dm_set_error("commit: an image of more than %u voxels is not supported", UINT_MAX);
    dm_commit_gpu_walk w;
    if (dm_commit_gpu_walk_open(g, &w) != 0) return -1;
    const dm_cuda *cu = w.cu;
    if (dm_commit_dict_begin(d, n) != 0) return -1;
    const int threads = o->threads > 0 ? o->threads : 1;
    dev_list dev = {cu, {0}, 0};
    unsigned long long *bits = grid->mask ? dm_commit_mask_bits(grid, threads) : NULL;
    long *count = calloc((size_t)n + 1, sizeof *count), cap = 0;
    const long most = end - first; /* a block's per-streamline arrays at most */
    long *rel = malloc((size_t)(most ? most : 1) * sizeof *rel),
         *cnt = malloc((size_t)(most ? most : 1) * sizeof *cnt),
         *at = malloc((size_t)(most ? most : 1) * sizeof *at),
         *dest = malloc((size_t)(most ? most : 1) * sizeof *dest);
    double *len = malloc((size_t)(most ? most : 1) * sizeof *len);
    float *nrm = malloc((size_t)(most ? most : 1) * sizeof *nrm);
    int rc = -1;
    if ((grid->mask && !bits) || !count || !rel || !cnt || !at || !dest || !len || !nrm) {
        dm_set_error("commit: out of memory for the dictionary");
        goto done;
    }
    /* the grid, the mask's bits and the direction table on the GPU */
    dm_walk_geom geom;
    memset(&geom, 0, sizeof geom);
    geom.nx = grid->nx, geom.ny = grid->ny, geom.nz = grid->nz;
    memcpy(geom.w2v, grid->w2v, sizeof geom.w2v);
    memcpy(geom.shift, o->shift, sizeof geom.shift);
    geom.min_seg = o->min_seg_len;
    CUdeviceptr d_bits = 0, d_table, d_tedge, d_pedge;
    const size_t nw = (size_t)grid->nx * grid->ny * grid->nz / 64 + 1;
    if ((bits && dev_up(&dev, &d_bits, bits, nw * sizeof *bits) != 0) ||
        dev_up(&dev, &d_table, dirs->table, (size_t)dirs->nt * dirs->np * sizeof *dirs->table) ||
        dev_up(&dev, &d_tedge, dirs->t_edge, 2 * (size_t)dirs->nt * sizeof *dirs->t_edge) ||
        dev_up(&dev, &d_pedge, dirs->p_edge, 2 * (size_t)dirs->np * sizeof *dirs->p_edge))
        goto done;
    geom.mask_bits = (const unsigned long long *)d_bits;
    geom.dirs = (dm_walk_dirs){dirs->nt, dirs->np, (const unsigned short *)d_table,
                               (const double *)d_tedge, (const double *)d_pedge};
    const int fixed = dev.n;
    size_t room;
    if (dm_gpu_memory_budget(cu, 0, &room) != 0) goto done;
    long nseg = 0;
    for (long b0 = first; b0 < end;) {
        const long b1 = block_end(t, b0, end, room), nb = b1 - b0, p0 = t->start[b0];
        const size_t npts = (size_t)(t->start[b1] - p0);
        for (long i = 0; i < nb; i++) rel[i] = t->start[b0 + i] - p0;
        CUdeviceptr d_xyz, d_rel, d_np, d_cnt, d_at, d_pieces, d_len, d_nrm, d_dest, d_vox, d_dir,
            d_seg;
        const int put = dm_gpu_stager_put(w.stage, &d_xyz, t->xyz + 3 * p0,
                                          npts * 3 * sizeof(float), "the streamlines");
        if (d_xyz) dev.a[dev.n++] = d_xyz;
        if (put != 0) goto done;
        if (dev_up(&dev, &d_rel, rel, (size_t)nb * sizeof *rel) != 0 ||
            dev_up(&dev, &d_np, t->npoints + b0, (size_t)nb * sizeof *t->npoints) != 0 ||
            dev_alloc(&dev, &d_cnt, (size_t)nb * sizeof *cnt) != 0 ||
            dm_gpu_stager_wait(w.stage) != 0)
            goto done;
        /* pass 1: the pieces counted; each streamline's place in the scratch */
        void *a1[] = {&geom, &d_xyz, &d_rel, &d_np, (void *)&nb, &d_cnt};
        if (launch(&w, w.count, a1) != 0 || dev_down(cu, cnt, d_cnt, (size_t)nb * sizeof *cnt))
            goto done;
        long raw = 0;
        for (long i = 0; i < nb; i++) at[i] = raw, raw += cnt[i];
        /* pass 2: cut, sorted and merged */
        if (dev_up(&dev, &d_at, at, (size_t)nb * sizeof *at) != 0 ||
            dev_alloc(&dev, &d_pieces, (size_t)raw * sizeof(dm_walk_piece)) != 0 ||
            dev_alloc(&dev, &d_len, (size_t)nb * sizeof *len) != 0 ||
            dev_alloc(&dev, &d_nrm, (size_t)nb * sizeof *nrm) != 0)
            goto done;
        void *a2[] = {&geom, &d_xyz, &d_rel,    &d_np,  (void *)&nb,
                      &d_at, &d_cnt, &d_pieces, &d_len, &d_nrm};
        if (launch(&w, w.cut, a2) != 0 || dev_down(cu, cnt, d_cnt, (size_t)nb * sizeof *cnt) ||
            dev_down(cu, len, d_len, (size_t)nb * sizeof *len) ||
            dev_down(cu, nrm, d_nrm, (size_t)nb * sizeof *nrm))
            goto done;
        /* which are kept (as the host's cut decides) and where their segments go */
        const long seg0 = nseg;
        for (long i = 0; i < nb; i++) {
            const long s = b0 + i;
            if (cnt[i] < 0) {
                dm_set_error("commit: the GPU's dictionary walk ran out of room (a bug)");
                goto done;
            }
            dest[i] = -1;
            if (!(cnt[i] > 0 && len[i] > o->min_len && len[i] < o->max_len)) continue;
            d->kept[s] = 1;
            d->length[s] = (float)len[i];
            d->norm[s] = nrm[i];
            count[s] = cnt[i];
            dest[i] = nseg - seg0;
            nseg += cnt[i];
        }
        /* pass 3: the kept streamlines' segments in place, then to the host */
        const size_t kb = (size_t)(nseg - seg0);
        if (dev_up(&dev, &d_dest, dest, (size_t)nb * sizeof *dest) != 0 ||
            dev_alloc(&dev, &d_vox, kb * sizeof *d->seg_vox) != 0 ||
            dev_alloc(&dev, &d_dir, kb * sizeof *d->seg_dir) != 0 ||
            dev_alloc(&dev, &d_seg, kb * sizeof *d->seg_len) != 0)
            goto done;
        void *a3[] = {&d_pieces, &d_at, &d_cnt, &d_dest, (void *)&nb, &d_vox, &d_dir, &d_seg};
        if (launch(&w, w.place, a3) != 0 || host_room(d, nseg, &cap) != 0 ||
            dm_gpu_stager_get(w.stage, d->seg_vox + seg0, d_vox, kb * sizeof *d->seg_vox,
                              "the dictionary") != 0 ||
            dm_gpu_stager_get(w.stage, d->seg_dir + seg0, d_dir, kb * sizeof *d->seg_dir,
                              "the dictionary") != 0 ||
            dm_gpu_stager_get(w.stage, d->seg_len + seg0, d_seg, kb * sizeof *d->seg_len,
                              "the dictionary") != 0)
            goto done;
        dev_free_from(&dev, fixed);
        b0 = b1;
    }
    if (host_room(d, nseg ? nseg : 1, &cap) != 0) goto done;
    dm_commit_dict_columns(d, count);
    rc = 0;
done:
    dev_free_from(&dev, 0);
    free(bits);
    free(count);
    free(rel);
    free(cnt);
    free(at);
    free(dest);
    free(len);
    free(nrm);
    if (rc != 0) dm_commit_dict_free(d);
    return rc;
}
