/* dimoc track on GPUs (see track_gpu.h).  One host thread per GPU, two launch slots each (own
 * stream, scratch, key buffers), so that the host merges one slot's matrix keys (on all its
 * cores, track_sparse_shards.h) while the other slot's kernel runs.  Every streamline's Philox stream is keyed by (rseed, id) as on
 * the CPU, counts are integer atomics and matrices are merged sorted, so results do not
 * depend on the GPUs, the chunking or the scheduling. */
#include "track/track_gpu.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"
#include "track/track_gpu_host.h"
#include "track/track_sparse_shards.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_THREADS 128
#define CHUNK_PER_THREAD 16           /* streamlines of one launch per resident thread */
#define MAX_KEY_CAP ((size_t)1 << 24) /* matrix keys per buffer (128 MB) */
#define MAX_SLOTS 4

static const char *const tracker_templates[] = {"track/gpu_tracker.cu",      "track/track_kernel.h",
                                                "track/track_gpu_gather.h",  "maths/philox.h",
                                                "track/track_surface_hit.h", NULL};
/* --fmad=false: no fused multiply-adds, so every float operation rounds as the host's do. */
static const char *const tracker_options[] = {"--fmad=false", NULL};

static const dm_gpu_source tracker_source = {.name = "tracker",
                                             .what = "the tracker",
                                             .prologue = "#include \"track/gpu_tracker.cu\"\n",
                                             .templates = tracker_templates,
                                             .options = tracker_options};

int dm_track_gpu_compile(const dm_cuda *cu, int arch, int use_cache, dm_gpu_program *out)
{
    return dm_gpu_compile_source(cu, &tracker_source, arch, use_cache, out);
}

int dm_track_gpu_precompile(const dm_cuda *cu, int arch, int quiet)
{
    const char *const labels[1] = {"track samples"};
    return dm_gpu_precompile(cu, arch, &tracker_source, labels, 1, quiet);
}

typedef struct track_job {
    const dm_cuda *cu;
    const dm_gpu_program *prog;
    const dm_track_field *f;
    const dm_track_seeds *s;
    const dm_track_masks *m;
    const dm_track_options *o;
    dm_track_ctx ctx;         /* host pointers; each GPU swaps in its own */
    unsigned long long total; /* the end of the streamline ids tracked (--part: of its share) */
    atomic_ullong next;       /* first streamline of the next chunk */
    int mats[3];              /* matrices asked for */
    int nslots, persistent;   /* launches in flight per GPU; scheduling (see gpu_tracker.cu) */
    dm_progress *progress;
} track_job;

typedef struct track_worker {
    track_job *job;
    int ordinal, rc;
    char error[512];
    unsigned int *paths, *s2t; /* this GPU's counts, downloaded at the end */
    unsigned int *network;     /* this GPU's --network counts */
    unsigned long long stats[DM_TG_NSTATS];
    dm_sparse_shards mat[3];
    double merge_s, wait_s; /* host time merging keys, and waiting for the GPU */
    /* device state */
    CUfunction fn;
    dm_track_ctx ctx;
    dm_track_gpu_out out; /* shared part; slots fill in keys and counters */
    int la, lb, set_bits, loop_cap;
    unsigned long long threads, chunk, chunk_max, key_cap[3];
    unsigned long long *ovl[3]; /* host copies of overflow lists */
} track_worker;

typedef struct slot {
    CUstream stream;
    CUdeviceptr a, b, set, loop_keys, loop_used, loop_dirs, keys[3], over[3], counters, ids;
    unsigned long long *hkeys[3], *hover[3], *hcount, *hids; /* pinned */
    unsigned long long n;
    int busy;
} slot;

#define DEVPTR(T, d) ((T *)(uintptr_t)(d))

/* dm_gpu_upload, the data named "the tracking inputs" in messages. */
static int upload(const dm_cuda *cu, CUdeviceptr *d, const void *host, size_t n)
{
    return dm_gpu_upload(cu, d, host, n, "the tracking inputs");
}

static int alloc_slot(const dm_cuda *cu, const track_worker *w, slot *s)
{
    memset(s, 0, sizeof *s);
    unsigned long long t = w->threads;
    CK(cu->cuStreamCreate(&s->stream, 1 /* non-blocking */), "creating a stream");
    CK(cu->cuMemAlloc(&s->a, t * w->la * sizeof(int)), "allocating GPU scratch");
    CK(cu->cuMemAlloc(&s->b, t * w->lb * sizeof(int)), "allocating GPU scratch");
    CK(cu->cuMemAlloc(&s->set, (t << w->set_bits) * sizeof(int)), "allocating GPU scratch");
    if (w->loop_cap) {
        CK(cu->cuMemAlloc(&s->loop_keys, t * w->loop_cap * sizeof(int)), "allocating GPU scratch");
        CK(cu->cuMemAlloc(&s->loop_used, t * w->loop_cap * sizeof(int)), "allocating GPU scratch");
        CK(cu->cuMemAlloc(&s->loop_dirs, 3 * t * w->loop_cap * sizeof(float)),
           "allocating GPU scratch");
    }
    CK(cu->cuMemAlloc(&s->counters, 8 * sizeof(unsigned long long)), "allocating GPU memory");
    CK(cu->cuMemAllocHost((void **)&s->hcount, 8 * sizeof(unsigned long long)),
       "allocating pinned memory");
    for (int j = 0; j < 3; j++) {
        if (!w->job->mats[j]) continue;
        CK(cu->cuMemAlloc(&s->keys[j], w->key_cap[j] * 8), "allocating GPU memory for matrix keys");
        CK(cu->cuMemAlloc(&s->over[j], w->chunk_max * 8), "allocating GPU memory");
        CK(cu->cuMemAllocHost((void **)&s->hkeys[j], w->key_cap[j] * 8),
           "allocating pinned memory");
        CK(cu->cuMemAllocHost((void **)&s->hover[j], w->chunk_max * 8), "allocating pinned memory");
    }
    CK(cu->cuMemAlloc(&s->ids, w->chunk_max * 8), "allocating GPU memory");
    CK(cu->cuMemAllocHost((void **)&s->hids, w->chunk_max * 8), "allocating pinned memory");
    return 0;
fail:
    return -1;
}

static void free_slot(const dm_cuda *cu, slot *s)
{
    CUdeviceptr dev[] = {s->a,         s->b,       s->set,      s->loop_keys, s->loop_used,
                         s->loop_dirs, s->keys[0], s->keys[1],  s->keys[2],   s->over[0],
                         s->over[1],   s->over[2], s->counters, s->ids};
    void *host[] = {s->hkeys[0], s->hkeys[1], s->hkeys[2], s->hover[0],
                    s->hover[1], s->hover[2], s->hcount,   s->hids};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        if (dev[i]) cu->cuMemFree(dev[i]);
    for (size_t i = 0; i < sizeof host / sizeof *host; i++)
        if (host[i]) cu->cuMemFreeHost(host[i]);
    if (s->stream) cu->cuStreamDestroy(s->stream);
}

/* Streamlines [first, first + n) (or ids[0..n) on the device) through the kernel. */
static int launch(track_worker *w, slot *s, unsigned long long first, unsigned long long n,
                  CUdeviceptr ids, int what)
{
    const dm_cuda *cu = w->job->cu;
    CK(cu->cuMemsetD32Async(s->counters, 0, 16, s->stream), "clearing GPU counters");
    dm_track_gpu_out out = w->out;
    out.nkeys = DEVPTR(unsigned long long, s->counters);
    out.noverflow = out.nkeys + 3;
    for (int j = 0; j < 3; j++) {
        out.keys[j] = DEVPTR(unsigned long long, s->keys[j]);
        out.overflow[j] = DEVPTR(unsigned long long, s->over[j]);
        out.key_cap[j] = w->key_cap[j];
    }
    dm_track_gpu_scratch scr = {DEVPTR(int, s->a),
                                DEVPTR(int, s->b),
                                DEVPTR(int, s->set),
                                w->la,
                                w->lb,
                                w->set_bits,
                                DEVPTR(int, s->loop_keys),
                                DEVPTR(int, s->loop_used),
                                DEVPTR(float, s->loop_dirs),
                                w->loop_cap};
    CUdeviceptr next = s->counters + 6 * sizeof(unsigned long long);
    int persistent = w->job->persistent;
    void *args[] = {&w->ctx, &out, &scr, &first, &n, &ids, &what, &next, &persistent};
    unsigned long long threads = w->threads < n ? w->threads : n;
    return dm_gpu_launch(cu, w->fn, threads, BLOCK_THREADS, s->stream, args,
                         "launching the tracking kernel");
fail:
    return -1;
}

/* Downloads the counters and the keys of the matrices in `mats`, merges the keys, and copies
 * the overflow lists into w->ovl (novl their lengths). */
static int drain(track_worker *w, slot *s, const int mats[3], unsigned long long novl[3])
{
    const dm_cuda *cu = w->job->cu;
    CK(cu->cuMemcpyDtoHAsync(s->hcount, s->counters, 8 * sizeof(unsigned long long), s->stream),
       "copying from the GPU");
    double t0 = dm_now_seconds();
    CK(cu->cuStreamSynchronize(s->stream), "running the tracking kernel");
    w->wait_s += dm_now_seconds() - t0;
    unsigned long long nk[3];
    for (int j = 0; j < 3; j++) {
        novl[j] = 0;
        if (!mats[j]) continue;
        nk[j] = s->hcount[j] < w->key_cap[j] ? s->hcount[j] : w->key_cap[j];
        novl[j] = s->hcount[3 + j];
        if (nk[j])
            CK(cu->cuMemcpyDtoHAsync(s->hkeys[j], s->keys[j], nk[j] * 8, s->stream),
               "copying from the GPU");
        if (novl[j])
            CK(cu->cuMemcpyDtoHAsync(s->hover[j], s->over[j], novl[j] * 8, s->stream),
               "copying from the GPU");
    }
    CK(cu->cuStreamSynchronize(s->stream), "copying from the GPU");
    double t1 = dm_now_seconds();
    for (int j = 0; j < 3; j++) {
        if (!mats[j]) continue;
        /* sorted and merged in bulk, by row shards on all cores (DM_TG_EMPTY_KEY slots
         * skipped): one key at a time on one core was the limit of dense connectomes */
        dm_sparse_shards_add_keys(&w->mat[j], s->hkeys[j], nk[j]);
        memcpy(w->ovl[j], s->hover[j], novl[j] * 8);
    }
    w->merge_s += dm_now_seconds() - t1;
    return 0;
fail:
    return -1;
}

/* Waits for the slot's launch and merges its keys; streamlines whose keys did not fit run
 * again, one matrix at a time, until none is left. */
static int collect(track_worker *w, slot *s)
{
    const dm_cuda *cu = w->job->cu;
    unsigned long long novl[3];
    if (drain(w, s, w->job->mats, novl) != 0) return -1;
    if (novl[0] + novl[1] + novl[2] > 0 && w->chunk > w->threads) w->chunk /= 2;
    for (int j = 0; j < 3; j++) {
        int only[3] = {0, 0, 0};
        only[j] = 1;
        while (novl[j] > 0) {
            unsigned long long n = novl[j], dummy[3];
            memcpy(s->hids, w->ovl[j], n * 8);
            CK(cu->cuMemcpyHtoDAsync(s->ids, s->hids, n * 8, s->stream), "copying to the GPU");
            if (launch(w, s, 0, n, s->ids, DM_TG_M1 << j) != 0 || drain(w, s, only, dummy) != 0)
                return -1;
            novl[j] = dummy[j];
        }
    }
    dm_progress_add(w->job->progress, (long)s->n);
    s->busy = 0;
    return 0;
fail:
    return -1;
}

/* Chooses threads, chunk and key buffer sizes from the free memory (after the inputs). */
static int plan_memory(track_worker *w, CUdevice dev)
{
    const dm_cuda *cu = w->job->cu;
    const dm_track_options *o = w->job->o;
    const dm_track_masks *m = w->job->m;
    size_t allow = 0;
    int sms = 0, per_sm = 0;
    if (dm_gpu_memory_budget(cu, o->gpu_memory_mb, &allow) != 0) return -1;
    CK(cu->cuDeviceGetAttribute(&sms, DM_CU_ATTR_MULTIPROCESSOR_COUNT, dev),
       "reading the GPU's attributes");
    CK(cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, w->fn, BLOCK_THREADS, 0),
       "reading the tracking kernel's occupancy");
    unsigned long long L = 2ull * (w->ctx.half_steps + 1);
    w->lb = (int)L;
    w->la = (int)(L > (unsigned long long)m->ntargets / 32 + 1
                      ? L
                      : (unsigned long long)m->ntargets / 32 + 1);
    w->set_bits = 6;
    while ((1ull << w->set_bits) < 2 * L) w->set_bits++; /* the distinct-voxel set: load <= 1/2 */
    w->loop_cap = 0;
    if (o->loopcheck) {
        w->loop_cap = 64;
        while ((unsigned long long)w->loop_cap < L) w->loop_cap *= 2; /* >= 2 * points of a half */
    }
    int nmat = w->job->mats[0] + w->job->mats[1] + w->job->mats[2];
    unsigned long long n3 = (unsigned long long)m->n3 < L ? (unsigned long long)m->n3 : L;
    unsigned long long most[3] = {L, L, n3 * (n3 ? n3 - 1 : 0) / 2}; /* keys of one streamline */
    size_t key_bytes = 0;
    for (int j = 0; j < 3; j++) {
        w->key_cap[j] = 0;
        if (!w->job->mats[j]) continue;
        unsigned long long cap = allow / (8 * 4 * 2 * (size_t)nmat); /* keys: a quarter of it */
        if (cap > MAX_KEY_CAP) cap = MAX_KEY_CAP;
        if (cap < most[j] + 1) cap = most[j] + 1;
        w->key_cap[j] = cap;
        key_bytes += 2 * cap * 8;
    }
    size_t per_thread = 4 * ((size_t)w->la + w->lb + ((size_t)1 << w->set_bits)) +
                        (size_t)w->loop_cap * 20 + CHUNK_PER_THREAD * 8 * ((size_t)nmat + 1);
    unsigned long long threads = (unsigned long long)per_sm * sms * BLOCK_THREADS;
    if (threads == 0) threads = BLOCK_THREADS;
    size_t room = allow > key_bytes ? allow - key_bytes : 0;
    if (threads > room / (2 * per_thread)) threads = room / (2 * per_thread);
    threads -= threads % BLOCK_THREADS;
    if (threads == 0)
        return dm_set_error("not enough free GPU memory to track (%zu MB allowed, %zu MB needed "
                            "at least)",
                            allow >> 20, (key_bytes + 2 * per_thread * BLOCK_THREADS) >> 20);
    w->threads = threads;
    w->chunk_max = threads * CHUNK_PER_THREAD;
    w->chunk = w->chunk_max;
    return 0;
fail:
    return -1;
}

static void *worker_main(void *arg)
{
    track_worker *w = arg;
    track_job *j = w->job;
    const dm_cuda *cu = j->cu;
    const dm_track_field *f = j->f;
    const dm_track_seeds *sd = j->s;
    const dm_track_masks *m = j->m;
    dm_gpu_kernel kern;
    memset(&kern, 0, sizeof kern);
    enum {
        NIN = 20
    }; /* 0..11 inputs, 12..13 outputs, 14..17 the surfaces' grid,
                          18..19 --network's seed groups and counts */
    CUdeviceptr in[NIN];
    memset(in, 0, sizeof in);
    slot slots[MAX_SLOTS];
    memset(slots, 0, sizeof slots);
    w->rc = -1;
    if (dm_gpu_kernel_open(cu, w->ordinal, j->prog, "dm_track_kernel", "tracker", "tracking kernel",
                           &kern) != 0)
        goto fail;
    w->fn = kern.fn;
    {
        size_t nv = (size_t)f->nx * f->ny * f->nz, per = nv * f->nsamples * f->nfibres;
        size_t nvox = m->nvox;
        int targets = j->o->os2t && m->ntargets > 0;
        const void *host[NIN] = {f->dirs,
                                 f->fracs,
                                 f->brain,
                                 sd->pos,
                                 sd->svox,
                                 m->flags,
                                 m->waybits,
                                 m->seed_col,
                                 m->t2_col,
                                 m->t3_node,
                                 targets ? m->target_off : NULL,
                                 targets ? m->target_ids : NULL,
                                 NULL,
                                 NULL};
        size_t bytes[NIN] = {3 * per * 4,
                             per * 4,
                             nv,
                             3 * (size_t)sd->n * 4,
                             (size_t)sd->n * 4,
                             nvox,
                             nvox * 4,
                             nvox * 4,
                             nvox * 4,
                             nvox * 4,
                             (nvox + 1) * 4,
                             targets ? (size_t)m->target_off[nvox] * 4 : 0,
                             0,
                             0};
        if (!j->mats[0]) host[7] = NULL;
        for (int i = 0; i < 12; i++)
            if (upload(cu, &in[i], host[i], bytes[i]) != 0) goto fail;
        size_t nnet = j->o->network ? (size_t)sd->ngroups * (sd->ngroups + 1) : 0;
        if (nnet) {
            if (upload(cu, &in[18], sd->group, (size_t)sd->n * 4) != 0) goto fail;
            CK(cu->cuMemAlloc(&in[19], nnet * 4), "allocating GPU memory for the network counts");
            CK(cu->cuMemsetD32Async(in[19], 0, nnet, NULL), "clearing GPU memory");
        }
        const dm_track_surface_grid *sg = &m->surfaces;
        if (sg->cell_off) {
            size_t ncell = (size_t)sg->n[0] * sg->n[1] * sg->n[2];
            if (upload(cu, &in[14], sg->tri, 9 * (size_t)sg->ntri * 4) != 0 ||
                upload(cu, &in[15], sg->cell_off, (ncell + 1) * 4) != 0 ||
                upload(cu, &in[16], sg->cell_tri, (size_t)sg->cell_off[ncell] * 4) != 0 ||
                upload(cu, &in[17], sg->tri_bit, (size_t)sg->ntri * 4) != 0)
                goto fail;
        }
        /* outputs: fdt_paths and seeds_to_targets counts, statistics */
        size_t npaths = j->o->opd ? nvox : 0, ns2t = targets ? (size_t)m->ntargets * nvox : 0;
        CK(cu->cuMemAlloc(&in[12], (npaths + ns2t + 1) * 4),
           "allocating GPU memory for the counts");
        CK(cu->cuMemsetD32Async(in[12], 0, npaths + ns2t + 1, NULL), "clearing GPU memory");
        CK(cu->cuMemAlloc(&in[13], DM_TG_NSTATS * 8), "allocating GPU memory");
        CK(cu->cuMemsetD32Async(in[13], 0, 2 * DM_TG_NSTATS, NULL), "clearing GPU memory");
        CK(cu->cuCtxSynchronize(), "clearing GPU memory");
        w->ctx = j->ctx;
        w->ctx.dirs = DEVPTR(const float, in[0]);
        w->ctx.fracs = DEVPTR(const float, in[1]);
        w->ctx.brain = DEVPTR(const unsigned char, in[2]);
        w->ctx.flags = DEVPTR(const unsigned char, in[5]);
        w->ctx.waybits = DEVPTR(const unsigned int, in[6]);
        if (sg->cell_off) { /* the grid's geometry is already in ctx (dm_track_ctx_init) */
            w->ctx.surfaces.tri = DEVPTR(const float, in[14]);
            w->ctx.surfaces.cell_off = DEVPTR(const int, in[15]);
            w->ctx.surfaces.cell_tri = DEVPTR(const int, in[16]);
            w->ctx.surfaces.tri_bit = DEVPTR(const unsigned int, in[17]);
        }
        dm_track_gpu_out *o = &w->out;
        memset(o, 0, sizeof *o);
        o->seed_pos = DEVPTR(const float, in[3]);
        o->seed_svox = DEVPTR(const int, in[4]);
        o->per_seed = j->o->per_seed;
        o->seed_col = DEVPTR(const int, in[7]);
        o->t2_col = DEVPTR(const int, in[8]);
        o->t3_node = DEVPTR(const int, in[9]);
        o->target_off = DEVPTR(const int, in[10]);
        o->target_ids = DEVPTR(const int, in[11]);
        o->ntargets = targets ? m->ntargets : 0;
        for (int b = 0; b < DM_TRACK_MAX_SURFACES; b++) o->surf_target[b] = m->surf_target[b];
        o->nvox = nvox;
        o->paths = npaths ? DEVPTR(unsigned int, in[12]) : NULL;
        o->seeds_to_targets = ns2t ? DEVPTR(unsigned int, in[12]) + npaths : NULL;
        o->stats = DEVPTR(unsigned long long, in[13]);
        o->seed_group = nnet ? DEVPTR(const int, in[18]) : NULL;
        o->ngroups = nnet ? sd->ngroups : 0;
        o->network = nnet ? DEVPTR(unsigned int, in[19]) : NULL;
        if (plan_memory(w, kern.dev) != 0) goto fail;
        for (int k = 0; k < 3; k++)
            if (j->mats[k] && !(w->ovl[k] = malloc(w->chunk_max * 8))) {
                dm_set_error("out of memory");
                goto fail;
            }
        for (int s = 0; s < j->nslots; s++)
            if (alloc_slot(cu, w, &slots[s]) != 0) goto fail;

        int what = DM_TG_COUNTS | (j->mats[0] ? DM_TG_M1 : 0) | (j->mats[1] ? DM_TG_M2 : 0) |
                   (j->mats[2] ? DM_TG_M3 : 0);
        for (int iter = 0;; iter++) { /* slots in turn: collect the oldest, launch it again */
            slot *s = &slots[iter % j->nslots];
            if (s->busy && collect(w, s) != 0) goto fail;
            /* After a signal: no new chunk, only the ones in flight are collected. */
            unsigned long long first =
                dm_stop_requested() ? j->total : atomic_fetch_add(&j->next, w->chunk);
            if (first >= j->total) {
                for (int k = 1; k < j->nslots; k++) {
                    slot *other = &slots[(iter + k) % j->nslots];
                    if (other->busy && collect(w, other) != 0) goto fail;
                }
                break;
            }
            s->n = j->total - first < w->chunk ? j->total - first : w->chunk;
            if (launch(w, s, first, s->n, 0, what) != 0) goto fail;
            s->busy = 1;
        }
        CK(cu->cuCtxSynchronize(), "running the tracking kernel");
        if (npaths + ns2t) {
            unsigned int *counts = malloc((npaths + ns2t) * 4);
            if (!counts) {
                dm_set_error("out of memory for the counts");
                goto fail;
            }
            CK(cu->cuMemcpyDtoHAsync(counts, in[12], (npaths + ns2t) * 4, NULL),
               "copying from the GPU");
            CK(cu->cuCtxSynchronize(), "copying from the GPU");
            w->paths = counts;
        }
        if (nnet) {
            if (!(w->network = malloc(nnet * 4))) {
                dm_set_error("out of memory for the network counts");
                goto fail;
            }
            CK(cu->cuMemcpyDtoHAsync(w->network, in[19], nnet * 4, NULL), "copying from the GPU");
        }
        CK(cu->cuMemcpyDtoHAsync(w->stats, in[13], DM_TG_NSTATS * 8, NULL), "copying from the GPU");
        CK(cu->cuCtxSynchronize(), "copying from the GPU");
    }
    w->rc = 0;
fail:
    if (w->rc != 0) snprintf(w->error, sizeof w->error, "GPU %d: %s", w->ordinal, dm_last_error());
    for (int s = 0; s < MAX_SLOTS; s++)
        if (slots[s].stream) free_slot(cu, &slots[s]);
    for (int i = 0; i < NIN; i++)
        if (in[i]) cu->cuMemFree(in[i]);
    for (int k = 0; k < 3; k++) free(w->ovl[k]);
    dm_gpu_kernel_close(cu, &kern);
    return NULL;
}

/* Benchmark knobs (docs/tracking.md): DIMOC_TRACK_SLOTS, launches in flight per GPU (1..4,
 * default 2); DIMOC_TRACK_SCHEDULE, persistent (default: threads take streamlines from a shared
 * counter) or static (thread t takes t, t + threads, ...). */
static int scheduling_knobs(track_job *j)
{
    const char *slots = getenv("DIMOC_TRACK_SLOTS"), *sched = getenv("DIMOC_TRACK_SCHEDULE");
    j->nslots = 2;
    j->persistent = 1;
    if (slots && *slots) {
        char *end;
        long n = strtol(slots, &end, 10);
        if (*end || n < 1 || n > MAX_SLOTS)
            return dm_set_error("DIMOC_TRACK_SLOTS must be 1..%d, not '%s'", MAX_SLOTS, slots);
        j->nslots = (int)n;
    }
    if (sched && *sched) {
        if (!strcmp(sched, "static"))
            j->persistent = 0;
        else if (strcmp(sched, "persistent"))
            return dm_set_error("DIMOC_TRACK_SCHEDULE must be persistent or static, not '%s'",
                                sched);
    }
    return 0;
}

int dm_track_run_gpu(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                     const dm_track_options *o, dm_track_result *r)
{
    memset(r, 0, sizeof *r);
    dm_cuda *cu = dm_cuda_open(1, 1);
    if (!cu) return -1;
    dm_gpu_set gs;
    int rc = 0;
    dm_gpu_program prog;
    memset(&prog, 0, sizeof prog);
    if (dm_gpu_select(cu, o->gpus, &gs) != 0 || dm_track_gpu_compile(cu, gs.arch, 1, &prog) != 0) {
        dm_cuda_close(cu);
        return -1;
    }
    snprintf(r->device, sizeof r->device, "%s", gs.device);
    int ngpu = gs.n;
    track_job j;
    memset(&j, 0, sizeof j);
    j.cu = cu;
    j.prog = &prog;
    j.f = f;
    j.s = s;
    j.m = m;
    j.o = o;
    dm_track_ctx_init(f, s, m, o, &j.ctx);
    unsigned long long first;
    dm_track_id_range(s, o, &first, &j.total); /* the ids [first, j.total) */
    atomic_init(&j.next, first);
    j.mats[0] = o->matrix1 && m->seed_col;
    j.mats[1] = o->matrix2 && m->t2_col;
    j.mats[2] = o->matrix3 && m->t3_node;
    if (scheduling_knobs(&j) != 0) {
        dm_gpu_program_free(&prog);
        dm_cuda_close(cu);
        return -1;
    }
    int targets = o->os2t && m->ntargets > 0;
    if (o->opd) r->paths = calloc(m->nvox, sizeof *r->paths);
    if (targets)
        r->seeds_to_targets = calloc((size_t)m->ntargets * m->nvox, sizeof *r->seeds_to_targets);
    size_t nnet = o->network ? (size_t)s->ngroups * (s->ngroups + 1) : 0;
    if (nnet) r->network = calloc(nnet, sizeof *r->network);
    dm_sparse_init(&r->m1);
    dm_sparse_init(&r->m2);
    dm_sparse_init(&r->m3);
    track_worker *w = calloc(ngpu, sizeof *w);
    if ((o->opd && !r->paths) || (targets && !r->seeds_to_targets) || (nnet && !r->network) || !w) {
        free(w);
        dm_gpu_program_free(&prog);
        dm_cuda_close(cu);
        return dm_set_error("track: out of memory for the outputs");
    }
    j.progress = dm_progress_start("track", (long)(j.total - first), "streamlines");
    double t0 = dm_now_seconds();
    pthread_t th[DM_GPU_MAX];
    for (int g = 0; g < ngpu; g++) {
        w[g].job = &j;
        w[g].ordinal = gs.ord[g];
        for (int k = 0; k < 3; k++) dm_sparse_shards_init(&w[g].mat[k], 0);
        pthread_create(&th[g], NULL, worker_main, &w[g]);
    }
    for (int g = 0; g < ngpu; g++) pthread_join(th[g], NULL);
    dm_progress_end(j.progress);
    r->generated = j.total - first;
    r->threads = 0;
    size_t npaths = o->opd ? m->nvox : 0, ns2t = targets ? (size_t)m->ntargets * m->nvox : 0;
    for (int g = 0; g < ngpu; g++) {
        if (w[g].rc != 0 && rc == 0) rc = dm_set_error("track: %s", w[g].error);
        if (rc == 0) {
            r->waytotal += w[g].stats[0];
            r->steps += w[g].stats[1];
            for (int e = 0; e < 6; e++) r->ends[e] += w[g].stats[2 + e];
            for (size_t v = 0; v < npaths; v++) r->paths[v] += w[g].paths[v];
            for (size_t v = 0; v < ns2t; v++) r->seeds_to_targets[v] += w[g].paths[npaths + v];
            for (size_t v = 0; v < nnet; v++) r->network[v] += w[g].network[v];
            dm_sparse_shards_gather(&w[g].mat[0], &r->m1);
            dm_sparse_shards_gather(&w[g].mat[1], &r->m2);
            dm_sparse_shards_gather(&w[g].mat[2], &r->m3);
            if (r->m1.failed || r->m2.failed || r->m3.failed)
                rc = dm_set_error("track: out of memory for the matrices");
            r->merge_seconds += w[g].merge_s;
            r->wait_seconds += w[g].wait_s;
        }
        free(w[g].paths);
        free(w[g].network);
        for (int k = 0; k < 3; k++) dm_sparse_shards_free(&w[g].mat[k]);
    }
    free(w);
    r->seconds = dm_now_seconds() - t0; /* with the gathering of the matrices */
    dm_gpu_program_free(&prog);
    dm_cuda_close(cu);
    if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
    if (rc == 0 && o->tck_max > 0) rc = dm_track_trace_saved(f, s, m, o, r);
    return rc;
}
