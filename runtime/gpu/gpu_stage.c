#include "gpu/gpu_stage.h"

#include "gpu/gpu_launch.h"
#include "io/bigalloc.h"
#include "util/error.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dm_gpu_stager {
    const dm_cuda *cu;
    size_t bytes;
    int threads;
    int next; /* the buffer the next part goes through */
    void *buf[2];
    CUstream stream[2]; /* buffer b's copies, so that refilling b waits for b's last copy only */
};

dm_gpu_stager *dm_gpu_stager_open(const dm_cuda *cu, size_t bytes, int threads)
{
    dm_gpu_stager *s = calloc(1, sizeof *s);
    if (!s) {
        dm_set_error("out of memory");
        return NULL;
    }
    s->cu = cu;
    s->bytes = bytes;
    s->threads = threads > 0 ? threads : 1;
    for (int b = 0; b < 2; b++) {
        CK(cu->cuMemAllocHost(&s->buf[b], bytes), "allocating pinned host memory");
        CK(cu->cuStreamCreate(&s->stream[b], 0), "creating a GPU stream");
    }
    return s;
fail:
    dm_gpu_stager_close(s);
    return NULL;
}

/* dst = src over n bytes, on the stager's threads (one thread copies at about a third of the
 * host's memory bandwidth). */
static void copy_parallel(void *dst, const void *src, size_t n, int threads)
{
    enum { PIECE = 1 << 20 };
    const long pieces = (long)((n + PIECE - 1) / PIECE);
#pragma omp parallel for schedule(static) num_threads(threads) if (pieces > 1)
    for (long i = 0; i < pieces; i++) {
        const size_t at = (size_t)i * PIECE, len = n - at < PIECE ? n - at : PIECE;
        memcpy((char *)dst + at, (const char *)src + at, len);
    }
}

int dm_gpu_stager_put(dm_gpu_stager *s, CUdeviceptr *d, const void *host, size_t n,
                      const char *what)
{
    const dm_cuda *cu = s->cu;
    dm_gpu_upload_message m;
    dm_gpu_upload_messages(what, &m);
    const char *alloc = m.alloc, *copy = m.copy;
    *d = 0;
    if (!host || n == 0) return 0;
    CK(cu->cuMemAlloc(d, n), alloc);
    for (size_t at = 0; at < n; at += s->bytes) {
        const size_t len = n - at < s->bytes ? n - at : s->bytes;
        const int b = s->next;
        s->next ^= 1;
        CK(cu->cuStreamSynchronize(s->stream[b]), copy); /* b's last part has left */
        copy_parallel(s->buf[b], (const char *)host + at, len, s->threads);
        CK(cu->cuMemcpyHtoDAsync(*d + at, s->buf[b], len, s->stream[b]), copy);
    }
    return 0;
fail:
    return -1;
}

int dm_gpu_stager_get(dm_gpu_stager *s, void *host, CUdeviceptr d, size_t n, const char *what)
{
    const dm_cuda *cu = s->cu;
    char copy[160];
    snprintf(copy, sizeof copy, "copying %s from the GPU", what ? what : "data");
    if (dm_gpu_stager_wait(s) != 0) return -1; /* the buffers free of earlier puts */
    const size_t parts = (n + s->bytes - 1) / s->bytes;
    /* part k into buffer k % 2: part k + 1 is on its way while the host copies part k out */
    for (size_t k = 0; k < parts + 1; k++) {
        if (k < parts) {
            const size_t at = k * s->bytes, len = n - at < s->bytes ? n - at : s->bytes;
            CK(cu->cuMemcpyDtoHAsync(s->buf[k & 1], d + at, len, s->stream[k & 1]), copy);
        }
        if (k == 0) continue;
        const size_t j = k - 1, at = j * s->bytes, len = n - at < s->bytes ? n - at : s->bytes;
        CK(cu->cuStreamSynchronize(s->stream[j & 1]), copy);
        copy_parallel((char *)host + at, s->buf[j & 1], len, s->threads);
    }
    s->next = 0;
    return 0;
fail:
    return -1;
}

int dm_gpu_stager_wait(dm_gpu_stager *s)
{
    const dm_cuda *cu = s->cu;
    for (int b = 0; b < 2; b++) CK(cu->cuStreamSynchronize(s->stream[b]), "copying to the GPU");
    return 0;
fail:
    return -1;
}

void dm_gpu_stager_close(dm_gpu_stager *s)
{
    if (!s) return;
    for (int b = 0; b < 2; b++) {
        if (s->stream[b]) {
            s->cu->cuStreamSynchronize(s->stream[b]);
            s->cu->cuStreamDestroy(s->stream[b]);
        }
        if (s->buf[b]) s->cu->cuMemFreeHost(s->buf[b]);
    }
    free(s);
}

int dm_gpu_pinned_alloc(const dm_cuda *cu, size_t bytes, dm_gpu_pinned *out)
{
    out->host = NULL;
    out->registered = 0;
    if (bytes == 0) bytes = 1;
    void *h = dm_big_alloc(bytes);
    if (h) {
        dm_big_clear(h, bytes); /* the pages faulted in on all threads, not by the driver's one */
        if (cu->cuMemHostRegister(h, bytes, 0) == 0) {
            out->host = h;
            out->registered = 1;
            return 0;
        }
        free(h);
    }
    CK(cu->cuMemAllocHost(&out->host, bytes), "allocating pinned host memory");
    return 0;
fail:
    out->host = NULL;
    return -1;
}

void dm_gpu_pinned_free(const dm_cuda *cu, dm_gpu_pinned *p)
{
    if (!p->host) return;
    if (p->registered) {
        cu->cuMemHostUnregister(p->host);
        free(p->host);
    } else {
        cu->cuMemFreeHost(p->host);
    }
    p->host = NULL;
    p->registered = 0;
}
